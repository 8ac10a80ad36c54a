"""Progress counters and the final summary table (rendered to a recording console)."""
import io

from rich.console import Console

from loadgen.client.http_client import RequestSpec
from loadgen.scenario.workload import PromptSpec
from loadgen.console.progress import RunProgress, failure_causes, failure_lines, print_summary
from loadgen.record import Record


def spec(i):
    return RequestSpec.of(PromptSpec("x", 1, 4), i)


def test_counters():
    p = RunProgress(5, enabled=True, console=Console(file=io.StringIO()))  # not a terminal
    assert p.enabled is False
    p.start("measured", 5)
    for i in range(3):
        p.on_send(spec(i))
    assert p.in_flight == 3
    p.on_done(Record(id=0, phase="measured", scheduled_at_ns=0, status="ok", output_tokens=4))
    p.on_done(Record(id=1, phase="measured", scheduled_at_ns=0, status="error"))
    p.on_done(Record(id=2, phase="measured", scheduled_at_ns=0, status="cancelled"))
    p.on_done(Record(id=3, phase="measured", scheduled_at_ns=0, status="cancelled"))  # never sent
    assert (p.completed, p.failed, p.cancelled, p.in_flight, p.tokens) == (1, 1, 2, 0, 4)
    p.stop()


def test_summary_table_shows_metrics_and_verdict():
    summary = {"requests_completed": 9, "requests_failed": 1, "requests_cancelled": 0,
               "requests_warmup": 2, "duration_s": 3.5, "request_throughput": 2.57,
               "output_throughput": 120.0, "goodput": None,
               "ttft_ms": {"mean": 12.5, "p50": 11.0, "p90": 20.0, "p99": 31.0, "count": 9},
               "tpot_ms": {"mean": None, "p50": None, "p90": None, "p99": None, "count": 0},
               "energy": {"status": "unmeasured", "reason": "no power source configured"},
               "client": {"warnings": ["client process used 95% of a core"]},
               "verdict": {"valid": False, "reasons": ["1 measured request(s) failed"]}}
    c = Console(file=io.StringIO(), width=120, record=True)
    print_summary(summary, "runs/x", console=c)
    out = c.export_text()
    assert "TTFT ms" in out and "31.00" in out and "TPOT" not in out   # no data: no row
    assert "INVALID" in out and "1 measured request(s) failed" in out
    assert "goodput n/a" in out and "95% of a core" in out and "no power source" in out


def test_summary_shows_probe_warnings_and_retries():
    summary = {"requests_completed": 3, "requests_failed": 0, "requests_retried": 2,
               "warnings": ["http://x rejected ignore_eos (HTTP 400: ...): dropped",
                            "probe to http://x[/v1] failed ([Errno 104] reset)"],   # not markup
               "verdict": {"valid": True, "reasons": []}}
    c = Console(file=io.StringIO(), width=200, record=True)
    print_summary(summary, "runs/x", console=c)
    out = c.export_text()
    assert "warning: http://x rejected ignore_eos" in out
    assert "probe to http://x[/v1] failed ([Errno 104] reset)" in out
    p = RunProgress(None, enabled=True, console=Console(file=io.StringIO()))
    p.warn("a [/b] c")                      # recorded (the display is off: not a terminal)
    assert p.warnings == ["a [/b] c"]
    assert "retried: 2 request(s) sent again on a fresh connection" in out


def test_failure_causes_most_common_first_with_a_sample():
    def r(kind, err, phase="measured", status="error"):
        return {"phase": phase, "status": status, "error_kind": kind, "error": err}
    recs = [r("connection", "ClientConnectorError: refused\n"), r("http", "HTTP 500: boom"),
            r("connection", "other"), r("http", "x", phase="warmup"), r(None, "?"),
            r("cancelled", "drain", status="cancelled"), {"phase": "measured", "status": "ok"}]
    assert failure_causes(recs) == [
        {"kind": "connection", "count": 2, "sample": "ClientConnectorError: refused"},
        {"kind": "http", "count": 1, "sample": "HTTP 500: boom"},
        {"kind": "unknown", "count": 1, "sample": "?"}]
    assert failure_causes(recs, top=1, statuses=("cancelled",))[0]["kind"] == "cancelled"
    lines = failure_lines({"requests_completed": 0, "requests_failed": 4, "requests_cancelled": 1},
                          failure_causes(recs, top=1))
    assert lines == ["no measured request completed (4 failed, 1 cancelled); most common causes:",
                     "  connection x2: ClientConnectorError: refused"]
    assert failure_lines({"requests_completed": 2, "requests_failed": 0}, []) == []
    assert failure_lines({"requests_completed": 0, "requests_failed": 2}, [])[0] \
        == "every measured request failed (2 of 2); most common causes:"
    assert failure_lines({"requests_completed": 0, "requests_failed": 0,
                          "requests_cancelled": 3}, [])[0].startswith("no measured request completed")


def test_roofline_line_adds_the_batch1_mbu_only_when_known():
    from loadgen.console.progress import roofline_line
    r = {"status": "calculated", "mbu": 0.17, "tpot_p50_ms": 107.0, "decode_floor_ms": 18.1,
         "device": {"name": "cpu", "source": "frozen", "evidence": "measured",
                    "mem_bandwidth": 2.2e10}, "decode": {"step_bytes": 4e8, "batch": 4},
         "batch1": {"mbu": 0.6425, "reason": None}}
    assert roofline_line({"roofline": r}).endswith(", batch 4), MBU 0.17, batch-1 MBU 0.64")
    r["batch1"] = {"mbu": None, "reason": "no inter-token gap had exactly one request in flight"}
    assert "batch-1" not in roofline_line({"roofline": r})
    del r["batch1"]                                      # a summary written before the split
    assert roofline_line({"roofline": r}).endswith("MBU 0.17")
