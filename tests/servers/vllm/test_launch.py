"""vLLM as a managed server without vLLM: argv building, the install hint, the SUT description,
and real `loadgen run`s of managed servers — a fake `vllm` executable (its `serve` starts the
calibration server, its `--version` prints a known string) and kind: command."""
import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from aiohttp import web

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.model import scenario_from_dict
from loadgen.scenario.target import ServerSpec
from servers.vllm.launch import (LaunchError, build_vllm_argv, describe_server, extra_args, gpu_inventory, launcher,
                          parse_flags, parse_gpu_csv, vllm_version)
from tests.support.procs import alive

ROOT = Path(__file__).resolve().parents[3]
FAKE_VLLM = textwrap.dedent(f'''\
    #!{sys.executable}
    """A stand-in for the vllm CLI: --version, and serve (the calibration server on --port)."""
    import json, os, sys
    args = sys.argv[1:]
    if args == ["--version"]:
        print("INFO 12-02 loading plugins")
        print("0.0.0-fake")
        sys.exit(0)
    assert args[0] == "serve", args
    with open(os.environ["FAKE_VLLM_ARGV"], "w") as f:
        json.dump(args, f)
    port = args[args.index("--port") + 1]
    sys.path.insert(0, {str(ROOT)!r})
    os.chdir({str(ROOT)!r})
    os.execv(sys.executable, [sys.executable, "-m", "tests.support.calibration_server",
                              "--port", port])
''')
VLLM_HERE = bool(shutil.which("vllm") or importlib.util.find_spec("vllm"))
SMI_CSV = ("0, NVIDIA H100 80GB HBM3, 550.54.15, 81559, GPU-1a2b\n"
           "1, NVIDIA H100 80GB HBM3, 550.54.15, 81559, GPU-3c4d\n")


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    """A directory first on PATH holding fake executables (real files the OS runs)."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    return d


def _exe(d: Path, name: str, text: str) -> Path:
    p = d / name
    p.write_text(text)
    p.chmod(0o755)
    return p


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


@pytest.mark.skipif(VLLM_HERE, reason="vllm is installed here")
def test_no_vllm_is_one_line_with_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))           # no vllm executable anywhere
    with pytest.raises(LaunchError) as e:
        launcher()
    msg = str(e.value)
    assert msg.startswith("target.server.kind: vllm is not on PATH") and "\n" not in msg
    assert "pip install vllm" in msg and "target.url" in msg


@pytest.mark.skipif(VLLM_HERE, reason="vllm is installed here")
def test_no_vllm_from_the_cli_exits_2(tmp_path):
    sc = tmp_path / "s.yaml"
    sc.write_text(f"target: {{server: {{kind: vllm, model: /models/x, load_format: dummy}}}}\n"
                  f"load: {{mode: concurrency, concurrency: 1, num_requests: 1}}\n"
                  f"output: {{dir: {tmp_path}}}\n")
    env = {**os.environ, "PATH": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "loadgen", "run", str(sc), "--json"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install vllm" in lines[0]
    assert "Traceback" not in p.stderr


def test_launcher_prefers_the_executable_on_path(bin_dir):
    fake = _exe(bin_dir, "vllm", FAKE_VLLM)
    assert launcher() == [str(fake)]


def test_gpu_inventory_from_nvidia_smi_and_without(bin_dir, monkeypatch, tmp_path):
    assert parse_gpu_csv(SMI_CSV) == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15",
         "memory_total_mib": 81559, "uuid": "GPU-1a2b"},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15",
         "memory_total_mib": 81559, "uuid": "GPU-3c4d"}]
    _exe(bin_dir, "nvidia-smi", f"#!/bin/sh\nprintf '{SMI_CSV}'\n")
    inv = gpu_inventory()
    assert inv["source"] == "nvidia-smi" and [g["uuid"] for g in inv["gpus"]] == ["GPU-1a2b",
                                                                                 "GPU-3c4d"]
    _exe(bin_dir, "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    inv = gpu_inventory()
    if inv.get("source") != "nvml":                      # a host with a GPU answers through NVML
        assert inv["status"] == "unavailable"
        assert "exited with 9: NVIDIA-SMI has failed" in inv["reason"]
        assert "NVML" in inv["reason"] or "nvidia-ml-py" in inv["reason"]   # either way, said
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    inv = gpu_inventory()
    if inv.get("source") != "nvml":
        assert inv["status"] == "unavailable" and "nvidia-smi not on PATH" in inv["reason"]


async def test_vllm_version_server_package_cli(bin_dir):
    fake = _exe(bin_dir, "vllm", FAKE_VLLM)
    async def version(request):
        return web.json_response({"version": "0.11.0"})
    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        v = await asyncio.to_thread(vllm_version, [str(fake)], url)
    finally:
        await runner.cleanup()
    assert v["server"] == "0.11.0" and v["version"] == "0.11.0"
    assert v["cli"]["status"] == "unavailable" and "not run" in v["cli"]["reason"]
    v = vllm_version([str(fake)], "http://127.0.0.1:9")  # nothing listens on port 9
    if isinstance(v["package"], dict):                  # vllm not installed here: the CLI answers
        assert v["cli"] == "0.0.0-fake" and v["version"] == "0.0.0-fake"
        assert "no vllm distribution" in v["package"]["reason"]
    assert v["server"]["status"] == "unavailable" and "/version" in v["server"]["reason"]
    broken = _exe(bin_dir, "vllm-broken", "#!/bin/sh\necho 'ImportError: libcuda' >&2\nexit 1\n")
    v = vllm_version([str(broken)], None)
    if isinstance(v["package"], dict):
        assert "exited with 1: ImportError: libcuda" in v["cli"]["reason"] and v["version"] is None


def test_describe_server_for_command_kind():
    s = ServerSpec(kind="command", command=["srv", "--port", "{port}", "--ctx", "8"],
                   env={"CUDA_VISIBLE_DEVICES": "1"})
    d = describe_server(s, ["srv", "--port", "5", "--ctx", "8", "--api-key", "sk-x"], None)
    assert d["kind"] == "command"
    assert d["flags"] == {"port": "5", "ctx": "8", "api-key": "<redacted>"}
    assert d["cuda_visible_devices"] == "1" and "version" not in d
    assert "gpus" in d


def _tree(tmp_path, server, **api):
    return {"name": "managed", "target": {"server": server, "metrics_interval_s": 0.2},
            "api": {"extra_body": {"calib": {"ttft_ms": 5, "itl_ms": 1}}, **api},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 4}},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 4},
            "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}}


def test_managed_vllm_run_with_a_fake_vllm(bin_dir, tmp_path, monkeypatch):
    _exe(bin_dir, "vllm", FAKE_VLLM)
    monkeypatch.setenv("FAKE_VLLM_ARGV", str(tmp_path / "argv.json"))
    server = {"kind": "vllm", "model": "/models/llama", "slots": 8, "max_model_len": 2048,
              "load_format": "dummy", "args": {"enable_chunked_prefill": True},
              "startup_timeout_s": 60}
    res = run_scenario(scenario_from_dict(_tree(tmp_path, server)))
    d = res.run_dir
    recs = read_records(d / "records.jsonl")
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:2] == ["serve", "/models/llama"] and "--load-format" in argv
    sut = json.loads((d / "sut.json").read_text())
    ms = sut["managed_server"]
    assert ms["kind"] == "vllm" and ms["argv"][1:] == argv
    desc = ms["sut"]
    assert desc["flags"]["max-num-seqs"] == "8" and desc["flags"]["load-format"] == "dummy"
    assert desc["flags"]["enable-chunked-prefill"] is True
    assert desc["version"]["server"]["status"] == "unavailable"      # no GET /version here
    if isinstance(desc["version"]["package"], dict):
        assert desc["version"]["cli"] == "0.0.0-fake"
    assert "gpus" in desc
    assert "PORT" in (d / "server.log").read_text()                  # the server's log is kept
    assert not alive(ms["pid"])
    meta = json.loads((d / "meta.json").read_text())
    assert meta["server_metrics"]["status"] == "unavailable"         # no /metrics: said why
    assert "HTTP 404" in meta["server_metrics"]["reason"]


def test_kind_command_run_against_the_calibration_server(tmp_path):
    server = {"kind": "command", "health_path": "/health", "startup_timeout_s": 60,
              "command": [sys.executable, "-m", "tests.support.calibration_server",
                          "--port", "{port}"]}
    res = run_scenario(scenario_from_dict(_tree(tmp_path, server, continuous_usage=True)))
    d = res.run_dir
    recs = read_records(d / "records.jsonl")
    assert sorted(r["id"] for r in recs) == [0, 1, 2, 3]
    assert all(r["status"] == "ok" and r["output_tokens"] == 4 for r in recs)
    sut = json.loads((d / "sut.json").read_text())
    assert sut["managed_server"]["kind"] == "command" and sut["model"] == "calib-model"
    assert sut["managed_server"]["sut"]["flags"]["port"] == str(sut["managed_server"]["argv"][-1])
    assert not alive(sut["managed_server"]["pid"])
    summary = json.loads((d / "summary.json").read_text())
    assert summary["requests_completed"] == 4
