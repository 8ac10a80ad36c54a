"""Managed servers: started, health-checked, logged and always stopped (real processes)."""
import os
import shutil
import sys
import textwrap
import time
import urllib.request

import pytest

from loadgen.targets.managed import ManagedServer, ServerStartError, build_argv
from loadgen.scenario.model import ScenarioError
from loadgen.scenario.target import ServerSpec
from tests.support.procs import alive

SERVER = textwrap.dedent('''
    import json, signal, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    port, mode = int(sys.argv[1]), sys.argv[2]
    if mode == "crash":
        print("boom: cannot load weights", flush=True)
        sys.exit(3)
    if mode == "stubborn":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health":
                code, body = (503 if mode == "never" else 200), b"{}"
            elif self.path == "/info":
                code, body = 200, json.dumps({"preset": "fake", "slots": 2}).encode()
            else:
                code, body = 404, b""
            self.send_response(code)
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            print("request", self.path, flush=True)
    print("listening", port, flush=True)
    try:
        ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
    except KeyboardInterrupt:
        print("stopped by SIGINT", flush=True)
''')


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "fake_server.py"
    p.write_text(SERVER)
    return p


def spec(script, mode, **kw):
    return ServerSpec(kind="command", command=[sys.executable, str(script), "{port}", mode], **kw)


def test_start_health_info_log_and_stop(script, tmp_path):
    with ManagedServer(spec(script, "ok"), tmp_path) as srv:
        pid = srv.proc.pid
        assert srv.info == {"preset": "fake", "slots": 2}
        with urllib.request.urlopen(srv.base_url + "/health", timeout=5) as r:
            assert r.status == 200
        assert srv.base_url == f"http://127.0.0.1:{srv.port}"
        assert srv.describe()["argv"][-2] == str(srv.port)     # "{port}" substituted
    assert not alive(pid) and srv.stopped_with == "SIGINT"
    log = (tmp_path / "server.log").read_text()
    assert "listening" in log and "request /health" in log and "stopped by SIGINT" in log


def test_startup_failure_shows_exit_code_and_log_tail(script, tmp_path):
    with pytest.raises(ServerStartError) as e:
        with ManagedServer(spec(script, "crash"), tmp_path):
            pytest.fail("must not enter")
    msg = str(e.value)
    assert "exited with code 3" in msg and "boom: cannot load weights" in msg


def test_startup_timeout_stops_the_server(script, tmp_path):
    srv = ManagedServer(spec(script, "never", startup_timeout_s=1.0), tmp_path, poll_s=0.05)
    t = time.monotonic()
    with pytest.raises(ServerStartError, match="startup_timeout_s: .* not healthy after 1 s"):
        srv.start()
    assert time.monotonic() - t < 15
    assert not alive(srv.proc.pid)


def test_stopped_when_the_body_raises(script, tmp_path):
    with pytest.raises(RuntimeError, match="load failed"):
        with ManagedServer(spec(script, "ok"), tmp_path) as srv:
            pid = srv.proc.pid
            raise RuntimeError("load failed")
    assert not alive(pid)


def test_escalates_to_sigkill(script, tmp_path):
    srv = ManagedServer(spec(script, "stubborn"), tmp_path, stop_timeouts_s=(0.3, 0.3, 5.0))
    with srv:
        pid = srv.proc.pid
    assert srv.stopped_with == "SIGKILL" and not alive(pid)


def test_jax_argv_has_exactly_the_server_flags():
    s = ServerSpec(kind="jax", preset="tiny", dtype="bf16", slots=4, max_model_len=512,
                   max_queue=64, model="/models/x", args={"seed": 3, "verbose": True})
    argv = build_argv(s, 8123)
    assert argv[:3] == [sys.executable, "-m", "servers.jax"]
    assert argv[3:] == ["--port", "8123", "--host", "127.0.0.1",   # --model replaces --preset
                        "--dtype", "bf16", "--slots", "4", "--max-model-len", "512",
                        "--max-queue", "64", "--model", "/models/x", "--seed", "3", "--verbose"]
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


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_cpus_pin_the_server(script, tmp_path):
    cpu = sorted(os.sched_getaffinity(0))[0]
    with ManagedServer(spec(script, "ok", cpus=[cpu]), tmp_path) as srv:
        assert os.sched_getaffinity(srv.proc.pid) == {cpu}
    with pytest.raises(ValueError, match="not all available"):
        spec(script, "ok", cpus=[10_000])
