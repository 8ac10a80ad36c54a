"""analysis.server.otlp_receiver: POST /v1/traces on its own thread, bounded. Hostile bodies (100 MB
announced, a stalled body, garbage, no Content-Length, too many spans) are refused or counted;
none hangs, none becomes a figure."""
import http.client
import socket

import pytest

from analysis.server.otlp_receiver import Receiver
from tests.analysis.server.otlp_bodies import GOOD, Q, js, pb, tid


@pytest.fixture(scope="module")
def rx():
    with Receiver(0, max_body_bytes=1 << 20, max_spans=50, read_timeout_s=0.15) as r:
        yield r


def post(rx, body: bytes, ctype="application/x-protobuf", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", rx.port, timeout=5)
    c.request("POST", "/v1/traces", body=body, headers={"Content-Type": ctype, **(headers or {})})
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


def raw(rx, head: bytes, body: bytes = b"") -> bytes:
    with socket.create_connection(("127.0.0.1", rx.port), timeout=5) as s:
        s.sendall(head + body)
        return s.recv(4096)


def test_protobuf_and_json_spans_are_kept_by_trace_id(rx):
    assert post(rx, pb([(tid(1), GOOD)]))[0] == 200
    assert post(rx, js([(tid(2), GOOD)]), "application/json") == (200, b"{}")
    t = rx.snapshot()["timings"]
    assert t[tid(1)]["queue_ms"] == pytest.approx(2.0) and tid(2) in t
    assert rx.endpoint == f"http://127.0.0.1:{rx.port}/v1/traces" and rx.port != 0


def test_garbage_protobuf_is_a_400_and_counted(rx):
    assert post(rx, b"\xff\xfe garbage")[0] == 400
    assert any("not an OTLP" in k for k in rx.snapshot()["refused_bodies"])


def test_a_100mb_body_is_refused_unread(rx):
    head = (b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 104857600\r\n\r\n")
    assert raw(rx, head).startswith(b"HTTP/1.1 413")
    assert rx.snapshot()["refused_bodies"]["body over the size limit"] >= 1


def test_a_stalled_body_ends_in_408(rx):
    head = (b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 1000\r\n\r\n")
    assert raw(rx, head, b"\x0a\x05").startswith(b"HTTP/1.1 408")


def test_no_content_length_is_a_411(rx):
    head = (b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert raw(rx, head, b"5\r\nhello\r\n0\r\n\r\n").startswith(b"HTTP/1.1 411")


def test_other_paths_and_methods(rx):
    c = http.client.HTTPConnection("127.0.0.1", rx.port, timeout=5)
    c.request("GET", "/v1/traces")
    assert c.getresponse().status == 405
    c.close()
    c = http.client.HTTPConnection("127.0.0.1", rx.port, timeout=5)
    c.request("POST", "/v1/metrics", body=b"")
    assert c.getresponse().status == 404
    c.close()


def test_bad_values_counted_with_their_reason():
    with Receiver(0) as r:
        post(r, pb([(tid(1), {**GOOD, Q: float("nan")}), (tid(2), {**GOOD, Q: -1.0})]))
        s = r.snapshot()
    assert s["timings"] == {}
    assert sum(s["bad_spans"].values()) == 2 and any("NaN" in k for k in s["bad_spans"])


def test_many_spans_stop_at_the_bound():
    with Receiver(0, max_spans=100) as r:
        for k in range(3):
            post(r, pb([(tid(k * 1000 + i), GOOD) for i in range(80)]))
        s = r.snapshot()
    assert len(s["timings"]) == 100 and s["dropped_spans"] == 140


def test_a_second_span_of_a_trace_is_a_duplicate_the_first_kept():
    with Receiver(0) as r:
        post(r, pb([(tid(1), GOOD), (tid(1), {**GOOD, Q: 0.001})]))
        s = r.snapshot()
    assert s["duplicate_spans"] == 1 and s["timings"][tid(1)]["queue_ms"] == pytest.approx(2.0)


def test_wait_quiet_is_bounded():
    import time
    with Receiver(0) as r:
        t0 = time.monotonic()
        r.wait_quiet(0.05, 1.0)        # nothing ever came: the quiet period, not the bound
        assert time.monotonic() - t0 < 0.5


def test_the_endpoint_still_names_the_bound_port_after_stop():
    # server_spans.json is written after the receiver stops: it said http://127.0.0.1:0/v1/traces
    rx = Receiver(0).start()
    live = rx.endpoint
    rx.stop()
    assert rx.endpoint == live and not live.endswith(":0/v1/traces")
