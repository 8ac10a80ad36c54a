"""load.cancel's server check (loadgen.run.running_after) against real servers on loopback:
vLLM's and llama.cpp's recorded /metrics (the replay server), a server whose running gauge
never drops (a leak), one without /metrics (the calibration server); and the summary's
warning (analysis.metrics.hangups)."""
import http.server
import json
import threading
from pathlib import Path

import pytest

from analysis.metrics import hangups
from loadgen.run import running_after
from tests.support.replay_server import ReplayServer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "servers"


def _recorded(server: str) -> str:
    d = json.loads((FIXTURES / server / "metrics.json").read_text())
    return "".join(c["text"] for c in d["response"]["chunks"])


@pytest.mark.parametrize("server,gauge", [("vllm", "vllm:num_requests_running"),
                                          ("llama.cpp", "llamacpp:requests_processing")])
def test_gauges_of_recorded_servers(server, gauge):
    assert running_after.running(_recorded(server)) == (gauge, 0.0)


def test_recorded_vllm_is_not_a_leak():
    with ReplayServer("vllm") as s:
        out = running_after.check(s.url)
    assert (out["metric"], out["value"], out["leaked"]) == ("vllm:num_requests_running", 0.0, False)


class _Leaky(http.server.BaseHTTPRequestHandler):
    def do_GET(self):                                   # noqa: N802 - http.server's name
        body = (b"# TYPE vllm:num_requests_running gauge\n"
                b'vllm:num_requests_running{model_name="m"} 2.0\n')
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_a_server_that_keeps_the_slot_is_reported():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Leaky)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        out = running_after.check(f"http://127.0.0.1:{srv.server_port}", wait_s=0.3)
    finally:
        srv.shutdown()
        srv.server_close()
    assert (out["value"], out["leaked"]) == (2.0, True) and "still 2 running" in out["reason"]
    summary = {"warnings": []}
    hangups.fill(summary, [], {"running_after": out})
    assert summary["cancel"]["leaked"] is True
    assert any("did not free the slots" in w for w in summary["warnings"])


def test_no_metrics_is_unknown_not_a_leak(calib_server):
    out = running_after.check(calib_server.url)
    assert out["leaked"] is None and out["metric"] is None and "GET /metrics" in out["reason"]
