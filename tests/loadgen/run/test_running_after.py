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
    value = b"2.0"                                      # the running gauge it reports

    def do_GET(self):                                   # noqa: N802 - http.server's name
        body = (b"# TYPE vllm:num_requests_running gauge\n"
                b'vllm:num_requests_running{model_name="m"} ' + self.value + b"\n")
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def _check(handler) -> dict:
    """running_after.check against a loopback server of ``handler`` (0.3 s of polling)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        return running_after.check(f"http://127.0.0.1:{srv.server_port}", wait_s=0.3)
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_server_that_keeps_the_slot_is_reported():
    out = _check(_Leaky)
    assert (out["value"], out["leaked"]) == (2.0, True) and "still 2 running" in out["reason"]
    summary = {"warnings": []}
    hangups.fill(summary, [], {"running_after": out})
    assert summary["cancel"]["leaked"] is True
    assert any("did not free the slots" in w for w in summary["warnings"])


def test_no_metrics_is_unknown_not_a_leak(calib_server):
    out = running_after.check(calib_server.url)
    assert out["leaked"] is None and out["metric"] is None and "GET /metrics" in out["reason"]


@pytest.mark.parametrize("value", [b"NaN", b"+Inf", b"abc", b"-1"])
def test_a_running_gauge_that_is_not_a_count_is_no_verdict(value):
    """Issue #41 item 2: NaN / +Inf kept the run polling and wrote {value: null, leaked: true}
    (then a TypeError in the summary); ``abc`` raised a ValueError out of running()."""
    out = _check(type("_Odd", (_Leaky,), {"value": value}))
    assert out["leaked"] is None and out["value"] is None
    assert out["metric"] == "vllm:num_requests_running" and "unknown" in out["reason"]
    summary = {"warnings": []}
    hangups.fill(summary, [], {"running_after": json.loads(json.dumps(out))})
    assert summary["cancel"]["leaked"] is None and "unknown" in summary["cancel"]["leaked_reason"]
    line = running_after.console_line({**summary, "requests_aborted": 1})
    assert "server running after: unknown" in line


def test_an_old_meta_with_a_null_value_and_a_leak_prints_without_a_crash():
    summary = {"warnings": []}
    hangups.fill(summary, [], {"running_after": {"metric": "vllm:num_requests_running",
                                                 "value": None, "waited_s": 10.0,
                                                 "leaked": True, "reason": None}})
    assert "unknown" in running_after.console_line({**summary, "requests_aborted": 0})


def test_no_metrics_gives_the_reason_in_the_summary_and_the_console(calib_server):
    out = running_after.check(calib_server.url)
    summary = {"warnings": []}
    hangups.fill(summary, [], {"running_after": out})
    assert "GET /metrics" in summary["cancel"]["leaked_reason"]
    assert "GET /metrics" in running_after.console_line({**summary, "requests_aborted": 1})
