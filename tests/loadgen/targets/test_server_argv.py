"""loadgen/targets/server_argv.py: the command line that starts each kind of managed server."""
import os
import shutil
import sys

import pytest

from loadgen.scenario.model import ScenarioError
from loadgen.scenario.target import ServerSpec
from loadgen.targets.server_argv import build_argv


def test_jax_argv_has_exactly_the_server_flags():
    s = ServerSpec(kind="jax", preset="tiny", dtype="bf16", slots=4, max_model_len=512,
                   max_queue=64, model="/models/x", interleave_chunk=0, matmul="ffi",
                   args={"seed": 3, "verbose": True})
    argv = build_argv(s, 8123)
    assert argv[:3] == [sys.executable, "-m", "servers.jax"]
    assert argv[3:] == ["--port", "8123", "--host", "127.0.0.1",   # --model replaces --preset
                        "--dtype", "bf16", "--slots", "4", "--max-model-len", "512",
                        "--max-queue", "64", "--model", "/models/x", "--interleave-chunk", "0",
                        "--matmul", "ffi", "--seed", "3", "--verbose"]
    assert build_argv(ServerSpec(kind="jax"), 1)[3:] == ["--preset", "small", "--port", "1",
                                                         "--host", "127.0.0.1"]


@pytest.mark.skipif(shutil.which("vllm") is not None, reason="vllm is installed here")
def test_vllm_missing_is_a_one_line_error():
    s = ServerSpec(kind="vllm", model="/models/llama", tensor_parallel_size=2)
    with pytest.raises(ScenarioError) as e:
        build_argv(s, 8000)
    assert str(e.value).startswith("target.server.kind: vllm is not on PATH")
    assert "\n" not in str(e.value)


def test_vllm_argv(tmp_path, monkeypatch):
    fake = tmp_path / "vllm"          # a real executable on PATH, so which() finds it
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    s = ServerSpec(kind="vllm", model="/models/llama", dtype="bfloat16", slots=128,
                   max_model_len=4096, tensor_parallel_size=2, gpu_memory_utilization=0.9,
                   load_format="dummy", args={"enable_prefix_caching": False,
                                              "max_num_batched_tokens": 8192})
    argv = build_argv(s, 8000)
    assert argv[0] == str(fake) and argv[1:3] == ["serve", "/models/llama"]
    joined = " ".join(argv)
    for part in ("--port 8000", "--host 127.0.0.1", "--dtype bfloat16", "--max-num-seqs 128",
                 "--max-model-len 4096", "--tensor-parallel-size 2",
                 "--gpu-memory-utilization 0.9", "--load-format dummy",
                 "--max-num-batched-tokens 8192"):
        assert part in joined
    assert "prefix" not in joined       # False flags are left out


def test_a_home_relative_model_directory_reaches_the_server_expanded():
    # docs/vllm.md's recipe writes `model: ~/.cache/...`: vLLM took "~/..." for a Hub repo id and
    # exited ("Repo id must be in the form ..."); the JAX server refused it as not a directory
    home = os.path.expanduser("~")
    for kind in ("jax", "vllm"):
        s = ServerSpec(kind=kind, model="~/models/small-hf")
        assert s.model == f"{home}/models/small-hf"
    assert ServerSpec(kind="vllm", model="meta-llama/Llama-3.1-8B").model == "meta-llama/Llama-3.1-8B"
    argv = build_argv(ServerSpec(kind="jax", model="~/m"), 1)
    assert argv[argv.index("--model") + 1] == f"{home}/m"
