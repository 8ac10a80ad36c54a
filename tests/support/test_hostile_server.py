"""The hostile server (servers/hostile/server.py, cases.py) sends what each case
promises: raw sockets, no HTTP library between."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import zlib

import pytest

from servers.hostile.server import CASES, HostileServer

BODY = json.dumps({"model": "hostile", "stream": True, "max_tokens": 3,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()


def post(port: int, path: str = "/v1/chat/completions", headers: str = "") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
               f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY)
    return s


def read_all(s: socket.socket, limit: int = 1 << 20) -> bytes:
    out = b""
    while len(out) < limit:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    return out


def dechunk(body: bytes) -> bytes:
    out = b""
    while True:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            return out
        out, body = out + rest[:n], rest[n + 2:]


def test_normal_streams_a_whole_answer_and_logs_the_request():
    with HostileServer("normal", lifetime_s=30) as srv:
        raw = read_all(post(srv.port, headers="Connection: close\r\nAuthorization: Bearer k\r\n"))
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head
        events = [e for e in dechunk(body).split(b"\n\n") if e]
        assert events[-1] == b"data: [DONE]" and len(events) == 1 + 3 + 1 + 1   # role, 3, finish
        log = srv.log()
        assert log["case"] == "normal"
        assert log["requests"][0]["headers"]["authorization"] == "Bearer k"
        models = json.loads(read_all(_get(srv.port, "/v1/models")).partition(b"\r\n\r\n")[2])
        assert models["data"][0]["id"] == "hostile"


def _get(port: int, path: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return s


def test_header_flood_never_ends_its_headers():
    with HostileServer("header_flood", lifetime_s=30) as srv:
        got = read_all(post(srv.port), limit=2 << 20)
        assert got.startswith(b"HTTP/1.1 200") and b"X-Flood: aaaa" in got
        assert len(got) >= 2 << 20 and b"\r\n\r\n" not in got


def test_reset_before_status_is_a_reset():
    with HostileServer("reset_before_status", lifetime_s=30) as srv:
        s = post(srv.port)
        with pytest.raises(ConnectionResetError):
            read_all(s)


def test_redirect_points_at_a_second_listener_that_records():
    with HostileServer("redirect_307", lifetime_s=30) as srv:
        head = read_all(post(srv.port, headers="Connection: close\r\n"))
        second = srv.log()["second_port"]
        assert head.startswith(b"HTTP/1.1 307")
        assert f"Location: http://127.0.0.1:{second}/v1/chat/completions".encode() in head
        read_all(post(second, headers="Connection: close\r\nX-Api-Key: s\r\n"))
        seen = [q for q in srv.log()["requests"] if q["listener"] == "second"]
        assert seen and seen[0]["headers"]["x-api-key"] == "s"


@pytest.mark.parametrize("case, wbits", [("gzip_stream", 16 + zlib.MAX_WBITS),
                                         ("deflate_stream", zlib.MAX_WBITS)])
def test_compressed_streams_decode_to_a_normal_stream(case, wbits):
    with HostileServer(case, lifetime_s=30) as srv:
        head, _, body = read_all(post(srv.port, headers="Connection: close\r\n")).partition(
            b"\r\n\r\n")
        assert b"Content-Encoding: " + case.split("_")[0].encode() in head
        text = zlib.decompressobj(wbits).decompress(dechunk(body))
        assert text.endswith(b"data: [DONE]\n\n") and text.count(b'"content": " tok"') == 3


def test_the_server_exits_after_its_lifetime():
    srv = HostileServer("never_answers", lifetime_s=1).start()
    try:
        srv.proc.wait(timeout=20)
        assert srv.proc.returncode == 0
    finally:
        srv.stop()


def test_every_case_is_runnable_from_the_command_line():
    out = subprocess.run([sys.executable, "-m", "servers.hostile.server", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and all(c in out.stdout for c in CASES)
    with pytest.raises(ValueError, match="unknown case"):
        HostileServer("no_such_case")


def test_endless_trailers_follow_a_whole_stream_and_never_end():
    with HostileServer("endless_trailers", lifetime_s=30) as srv:
        got = read_all(post(srv.port), limit=1 << 20)
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in body
        last = body.index(b"\r\n0\r\n")
        trailers = body[last + 5:]
        assert trailers.startswith(b"X-T: ttt") and trailers.count(b"\r\nX-T: ") >= 10
        assert b"\r\n\r\n" not in trailers                # the trailer section never ends


def test_second_response_sends_two_whole_answers_at_once():
    with HostileServer("second_response", lifetime_s=30) as srv:
        got = read_all(post(srv.port))
        assert got.count(b"HTTP/1.1 200 OK") == 2 and got.count(b"data: [DONE]") == 2


def test_interim_storm_sends_only_interim_answers():
    with HostileServer("interim_storm", lifetime_s=30) as srv:
        got = read_all(post(srv.port), limit=1 << 18)
        assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n") and b"200" not in got
        assert got.count(b"HTTP/1.1 100 Continue") > 1000


@pytest.mark.parametrize("case, wanted", [("open_after_done", b"data: [DONE]"),
                                          ("bad_event_open", b"data: {nope")])
def test_the_socket_stays_open_after_the_decisive_event(case, wanted):
    with HostileServer(case, lifetime_s=30) as srv:
        s = post(srv.port)
        got = b""
        while wanted not in got:
            got += s.recv(65536)
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):             # neither the end nor a close comes
            s.recv(65536)
        s.close()


def _metrics(url: str) -> str:
    import urllib.request
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return r.read().decode("latin-1")


@pytest.mark.parametrize("case, value", [("running_nan", "NaN"), ("running_inf", "+Inf"),
                                         ("running_text", "abc")])
def test_the_running_gauge_cases_say_what_they_promise(case, value):
    with HostileServer(case, lifetime_s=30) as s:
        assert f'vllm:num_requests_running{{model_name="hostile"}} {value}' in _metrics(s.url)


def test_counter_reset_goes_down_after_the_first_answer_then_past_its_start():
    with HostileServer("counter_reset", lifetime_s=30) as s:
        before = _metrics(s.url)
        read_all(post(s.port, headers="Connection: close\r\n"))
        reset, after = _metrics(s.url), _metrics(s.url)
    assert "prefix_cache_hits_total" in before and " 400.0" in before
    assert " 190.0" in reset and " 1400.0" in after and " 1600.0" in after


def test_retry_after_nonascii_sends_the_byte_0xb2():
    with HostileServer("retry_after_nonascii", lifetime_s=30) as s:
        raw = read_all(post(s.port, headers="Connection: close\r\n"))
    assert raw.startswith(b"HTTP/1.1 429") and b"\r\nRetry-After: \xb2\r\n" in raw
