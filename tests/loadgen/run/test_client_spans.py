"""loadgen/run/client_spans.py (--otlp-endpoint): loadgen's own span per record, the server's
span's parent; posted in batches after the run; a dead collector is one warning line."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from analysis.contract.record import Record
from loadgen.client.trace_context import TraceContext
from loadgen.run.client_spans import export, span_of, _dec


class _Catch(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        self.server.got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture
def collector():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Catch)
    srv.got = []
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def records(tmp_path, n=5):
    tc = TraceContext(prefix="00000000000000cd")
    lines = []
    for i in range(n):
        r = Record(id=i, phase="measured", scheduled_at_ns=1_000 + i, sent_at_ns=2_000 + i,
                   first_token_at_ns=5_000_000 + i, end_at_ns=9_000_000 + i, status="ok",
                   http_status=200, prompt_tokens=8, output_tokens=3)
        tc.stamp({}, r)                               # sets r.trace_id as a send would
        lines.append(r.to_json())
    lines.append(Record(id=n, phase="measured").to_json())      # never sent: no span
    (tmp_path / "records.jsonl").write_text("\n".join(lines) + "\n")
    return tc


def test_a_span_is_the_parent_the_traceparent_named(tmp_path):
    tc = TraceContext(prefix="00000000000000cd")
    r = Record(id=7, phase="measured", sent_at_ns=100, first_token_at_ns=1_100_100, end_at_ns=2_000_000,
               status="ok")
    tp = tc.stamp({}, r)["traceparent"]
    s = span_of(_dec(r.to_json().encode()), offset_ns=10)
    assert tp == f"00-{s['traceId']}-{s['spanId']}-01"
    assert s["startTimeUnixNano"] == "110" and s["endTimeUnixNano"] == "2000010"
    assert [e["name"] for e in s["events"]] == ["sent", "first_token", "end"]
    ttft = [a for a in s["attributes"] if a["key"] == "loadgen.ttft_ms"][0]
    assert ttft["value"]["doubleValue"] == pytest.approx(1.1)
    assert span_of(_dec(Record(id=1, phase="measured").to_json().encode()), 0) is None


def test_export_posts_every_traced_record_in_batches(tmp_path, collector):
    records(tmp_path, 5)
    out = export(tmp_path, f"http://127.0.0.1:{collector.server_port}/v1/traces", batch=2)
    assert out == {"spans": 5, "error": None}
    assert len(collector.got) == 3
    spans = [s for b in collector.got for s in b["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert [s["spanId"] for s in spans] == [f"{i + 1:016x}" for i in range(5)]


def test_a_dead_collector_is_one_line(tmp_path, collector):
    records(tmp_path, 1)
    port = collector.server_port
    collector.shutdown()
    collector.server_close()
    out = export(tmp_path, f"http://127.0.0.1:{port}/v1/traces", timeout_s=2)
    assert out["spans"] == 0 and out["error"].startswith("--otlp-endpoint http://127.0.0.1")


def test_a_bad_url_is_refused_by_the_flag():
    import argparse
    from loadgen.commands.run import otlp_url
    assert otlp_url("http://h:4318/v1/traces") == "http://h:4318/v1/traces"
    with pytest.raises(argparse.ArgumentTypeError, match="an http:// or https:// URL"):
        otlp_url("ftp://x")


def test_a_run_stored_as_records_arrow_exports_the_same_spans(tmp_path, collector):
    from analysis.contract.columnar import ColumnarWriter
    from analysis.contract.records import read_table
    records(tmp_path, 5)
    w = ColumnarWriter(tmp_path / "records.arrow")           # output.records: arrow
    for r in read_table(tmp_path / "records.jsonl").records:
        w.write(r)
    w.close()
    (tmp_path / "records.jsonl").unlink()
    url = f"http://127.0.0.1:{collector.server_port}/v1/traces"
    assert export(tmp_path, url, batch=10) == {"spans": 5, "error": None}
    spans = collector.got[0]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["spanId"] for s in spans] == [f"{i + 1:016x}" for i in range(5)]
