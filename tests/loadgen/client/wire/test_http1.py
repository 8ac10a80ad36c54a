"""loadgen/client/http1/message.py: the target URL and the request bytes (pure)."""
import pytest

from loadgen.client.http1.message import Target, WireResponse, request_head


def test_target_parses_host_port_path_and_rejects_https():
    t = Target("http://[::1]:8000/v1/completions?x=1")
    assert (t.host, t.port, t.key, t.hostport, t.path) == ("::1", 8000, ("::1", 8000), "[::1]:8000",
                                                           "/v1/completions?x=1")
    assert Target("http://example.org/").hostport == "example.org"
    with pytest.raises(ValueError, match="http://"):
        Target("https://example.org/")


def test_request_head_frames_the_body_and_drops_the_callers_framing():
    t = Target("http://127.0.0.1:9/v1/chat/completions")
    raw = request_head("POST", t, {"Content-Type": "application/json", "content-length": "999",
                                   "Connection": "keep-alive", "X-Session": "s1"}, b'{"a":1}')
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1" and lines[1] == "Host: 127.0.0.1:9"
    assert "X-Session: s1" in lines and "Content-Length: 7" in lines and body == b'{"a":1}'
    assert not any(ln.lower().startswith("connection") or ln == "content-length: 999" for ln in lines)
    assert "User-Agent: loadgen-wire/1" in lines and "Accept: */*" in lines
    closing = request_head("GET", t, {"Accept": "text/event-stream"}, b"", close=True).decode()
    assert "Connection: close" in closing and "Content-Length" not in closing
    assert "Accept: */*" not in closing


def test_response_content_type_and_stamp_source():
    r = WireResponse(headers={"content-type": "Text/Event-Stream; charset=utf-8"})
    assert r.content_type() == "text/event-stream" and r.stamp_source == "none"
    assert WireResponse().content_type() == "application/octet-stream"
    assert WireResponse(n_reads=3, kernel_reads=1).stamp_source == "mixed"


def test_out_of_file_descriptors_is_the_clients_fault():
    import errno
    from loadgen.client.http1.message import connect_failure
    for code in (errno.EMFILE, errno.ENFILE):
        kind, msg = connect_failure(OSError(code, "Too many open files"))
        assert kind == "client" and "--procs" in msg
    assert connect_failure(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))[0] == "connection"
