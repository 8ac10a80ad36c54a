"""Managed servers: started, health-checked, logged and always stopped (real processes)."""
import os
import sys
import textwrap
import time
import urllib.request

import pytest

from loadgen.targets.managed import ManagedServer, ServerStartError
from loadgen.scenario.target import ServerSpec
from servers.port_server import alive

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


def test_sigint_reaches_the_server_when_loadgen_runs_in_the_background(script, tmp_path):
    """`loadgen run ... &` in a script starts with SIGINT ignored; the server must not inherit that."""
    import signal
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with ManagedServer(spec(script, "ok"), tmp_path) as srv:
            pid = srv.proc.pid
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN     # put back as it was
    finally:
        signal.signal(signal.SIGINT, before)
    assert not alive(pid) and srv.stopped_with == "SIGINT"
    assert "stopped by SIGINT" in (tmp_path / "server.log").read_text()


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


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_cpus_pin_the_server(script, tmp_path):
    cpu = sorted(os.sched_getaffinity(0))[0]
    with ManagedServer(spec(script, "ok", cpus=[cpu]), tmp_path) as srv:
        assert os.sched_getaffinity(srv.proc.pid) == {cpu}
    with pytest.raises(ValueError, match="not all available"):
        spec(script, "ok", cpus=[10_000])


def test_health_from_a_foreign_process_on_the_port_is_not_our_server(tmp_path):
    """The free port is released before the server binds it: another process that takes it
    meanwhile must not pass for a vLLM still loading (seen on a shared host)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass
    foreign = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    slow = tmp_path / "vllm"                  # a "vllm" that never binds its port
    slow.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    slow.chmod(0o755)
    s = ServerSpec(kind="vllm", model="m", executable=str(slow), port=foreign.server_port,
                   startup_timeout_s=1.5)
    try:
        with pytest.raises(ServerStartError, match="no process started by loadgen listens"):
            ManagedServer(s, tmp_path, poll_s=0.05).start()
    finally:
        foreign.shutdown()
    import json
    lc = json.loads((tmp_path / "server.json").read_text())
    assert lc["status"] == "failed" and lc["port_warning"] and lc["stop"]["signals_sent"]


def test_lifecycle_record_of_start_env_and_stop(script, tmp_path):
    import json
    s = spec(script, "stubborn", env={"API_KEY": "sk-1", "MODE": "x"})
    srv = ManagedServer(s, tmp_path, stop_timeouts_s=(0.3, 0.3, 5.0))
    with srv:
        lc = json.loads((tmp_path / "server.json").read_text())
        assert lc["status"] == "healthy" and lc["pid"] == srv.proc.pid and lc["stop"] is None
    lc = json.loads((tmp_path / "server.json").read_text())
    assert lc["env_added"] == {"PYTHONUNBUFFERED": "1", "API_KEY": "[REDACTED]", "MODE": "x"}
    assert lc["argv"][-1] == "stubborn" and lc["status"] == "stopped"
    st = lc["stop"]
    assert st["signals_sent"] == ["SIGINT", "SIGTERM", "SIGKILL"] and st["signal"] == "SIGKILL"
    assert st["exit_code"] == -9 and st["exit_signal"] == "SIGKILL"
    with pytest.raises(ServerStartError):
        ManagedServer(spec(script, "crash"), tmp_path / "crash").start()
    lc = json.loads((tmp_path / "crash" / "server.json").read_text())
    assert lc["status"] == "failed" and "exited with code 3" in lc["cause"]
    assert "boom: cannot load weights" in lc["log_tail"] and lc["stop"]["exit_code"] == 3


def test_the_start_line_shows_the_logs_last_line(tmp_path):
    from loadgen.targets.managed import last_log_line
    log = tmp_path / "server.log"
    assert last_log_line(log) == ""                                  # not written yet
    log.write_bytes(b"x" * 5000 + b"\nINFO model built\n\x1b[32mcompiling decode bucket 8"
                    b"\x1b[0m\r 50%\r 80%  \n\n")
    assert last_log_line(log) == "80%"                               # a progress bar's last state
    log.write_text("INFO listening on http://127.0.0.1:8000 (warming up)\n" + "\n" * 3)
    assert last_log_line(log) == "INFO listening on http://127.0.0.1:8000 (warming up)"
    log.write_text("a" * 300)
    assert last_log_line(log, limit=20) == "a" * 19 + "…"
