"""servers/vllm/argv.py: the `vllm serve` command line built from a spec, and read back as flags."""
from loadgen.scenario.target import ServerSpec
from servers.vllm.argv import build_vllm_argv, extra_args, parse_flags


def test_argv_is_exactly_vllm_serve_with_the_spec():
    s = ServerSpec(kind="vllm", model="/models/llama", dtype="bfloat16", slots=64,
                   max_model_len=4096, tensor_parallel_size=2, gpu_memory_utilization=0.85,
                   load_format="dummy", args={"enable_prefix_caching": True, "seed": 0,
                                              "enforce_eager": False})
    argv = build_vllm_argv(s, 8000, prefix=["vllm"])
    assert argv == ["vllm", "serve", "/models/llama", "--host", "127.0.0.1", "--port", "8000",
                    "--dtype", "bfloat16", "--max-num-seqs", "64", "--max-model-len", "4096",
                    "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.85",
                    "--load-format", "dummy", "--enable-prefix-caching", "--seed", "0"]
    assert parse_flags(argv) == {"host": "127.0.0.1", "port": "8000", "dtype": "bfloat16",
                                 "max-num-seqs": "64", "max-model-len": "4096",
                                 "tensor-parallel-size": "2", "gpu-memory-utilization": "0.85",
                                 "load-format": "dummy", "enable-prefix-caching": True,
                                 "seed": "0"}
    assert build_vllm_argv(ServerSpec(kind="vllm", model="m"), 1, prefix=["v"]) == [
        "v", "serve", "m", "--host", "127.0.0.1", "--port", "1"]


def test_extra_args_shapes():
    assert extra_args({"a_b": [1, 2], "--raw": "x", "cfg": {"k": 1}, "off": None}) == [
        "--a-b", "1", "2", "--raw", "x", "--cfg", '{"k":1}']
    assert parse_flags(["x", "--a=1", "--b", "2", "3", "--c"]) == {"a": "1", "b": ["2", "3"],
                                                                  "c": True}
