"""The HTTP/1.1 exchange fed bytes directly, in the manner of h11's test_connection.py: every
framing, EOF, keep-alive, stale, trailer and bound rule of loadgen.client.http1.exchange, no
socket, no event loop."""
from __future__ import annotations

import pytest

from loadgen.client.http1.exchange import DONE, FAILED, GOING, SPILL, Exchange
from loadgen.client.http1.message import Ask, WireResponse

SSE = b"Content-Type: text/event-stream\r\n"
JSON = b"Content-Type: application/json\r\n"


def feed_all(ex: Exchange, *pieces: bytes, t0: int = 1) -> list:
    """Each piece one read, stamped t0, t0 + 1, ...: the feed answers."""
    return [ex.feed(t0 + i, p) for i, p in enumerate(pieces)]


def exchange(reused: bool = False, **ask) -> tuple:
    resp = WireResponse()
    return resp, Exchange(resp, reused=reused, ask=Ask(**ask))


# ---------------------------------------------------------------- framing
def test_content_length_body_ends_the_message_and_keeps_the_connection():
    resp, ex = exchange()
    head = b"HTTP/1.1 200 OK\r\n" + JSON + b"Content-Length: 11\r\n\r\n"
    assert feed_all(ex, head, b'{"a": ', b'"bc"}') == [GOING, GOING, DONE]
    assert (resp.status, resp.complete, resp.keep_alive) == (200, True, True)
    assert resp.body() == b'{"a": "bc"}' and resp.reusable
    assert resp.headers_at_ns == 1 and resp.end_at_ns == 3 and resp.n_reads == 3
    assert [t for t, _ in resp.reads] == [2, 3]          # one stamped piece per read


def test_chunked_body_pieces_of_one_read_are_joined_once():
    resp, ex = exchange()
    body = b"5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n"
    assert ex.feed(7, b"HTTP/1.1 200 OK\r\n" + SSE + b"Transfer-Encoding: chunked\r\n\r\n" + body) == DONE
    assert resp.reads == [(7, b"hello world")] and resp.complete and resp.keep_alive


def test_chunked_trailers_are_read_and_dropped():
    resp, ex = exchange()
    r = feed_all(ex, b"HTTP/1.1 200 OK\r\n" + SSE + b"Transfer-Encoding: chunked\r\n\r\n",
                 b"3\r\nabc\r\n0\r\n", b"X-Trailer: 1\r\n\r\n")
    assert r == [GOING, GOING, DONE]
    assert resp.body() == b"abc" and "x-trailer" not in resp.headers and resp.complete


def test_close_delimited_body_ends_at_eof_and_is_not_reused():
    resp, ex = exchange()
    assert feed_all(ex, b"HTTP/1.1 200 OK\r\n" + SSE + b"\r\n", b"data: 1\n\n") == [GOING, GOING]
    assert ex.eof(9) == DONE
    assert resp.complete and not resp.keep_alive and resp.end_at_ns == 9 and not resp.reusable
    assert resp.body() == b"data: 1\n\n"


def test_interim_1xx_answers_are_skipped():
    resp, ex = exchange()
    assert ex.feed(1, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n" + JSON
                   + b"Content-Length: 2\r\n\r\n{}") == DONE
    assert resp.status == 200 and resp.body() == b"{}"


def test_no_body_statuses_need_no_eof():
    resp, ex = exchange()
    assert ex.feed(1, b"HTTP/1.1 204 No Content\r\n\r\n") == DONE
    assert resp.complete and resp.keep_alive


# ---------------------------------------------------------------- EOF
def test_eof_mid_body_is_a_connection_failure():
    resp, ex = exchange()
    assert ex.feed(1, b"HTTP/1.1 200 OK\r\n" + JSON + b"Content-Length: 10\r\n\r\n12345") == GOING
    assert ex.eof(2) == FAILED
    assert resp.error_kind == "connection" and "before the response was complete" in resp.error
    assert not resp.complete and not resp.stale and resp.body() == b"12345"


def test_eof_mid_headers_is_a_connection_failure():
    resp, ex = exchange()
    assert ex.feed(1, b"HTTP/1.1 200 OK\r\nContent-Le") == GOING
    assert ex.eof(2) == FAILED and resp.error_kind == "connection" and resp.status is None


def test_eof_before_any_byte_of_a_reused_connection_is_stale():
    resp, ex = exchange(reused=True)
    assert ex.eof(5) == FAILED
    assert resp.stale and resp.error_kind == "connection" and "before the status line" in resp.error


def test_eof_before_any_byte_of_a_fresh_connection_is_not_stale():
    resp, ex = exchange(reused=False)
    assert ex.eof(5) == FAILED and not resp.stale and resp.error_kind == "connection"


def test_a_reused_connection_that_answered_a_byte_is_not_stale():
    resp, ex = exchange(reused=True)
    assert ex.feed(1, b"HTTP/1.") == GOING and ex.eof(2) == FAILED and not resp.stale


def test_bytes_after_the_end_are_not_read_into_the_answer():
    resp, ex = exchange()
    one = b"HTTP/1.1 200 OK\r\n" + JSON + b"Content-Length: 2\r\n\r\n{}"
    assert ex.feed(1, one + one) == DONE
    assert resp.body() == b"{}" and not resp.keep_alive      # a second message: not reused


# ---------------------------------------------------------------- keep-alive
@pytest.mark.parametrize("head, keep", [
    (b"HTTP/1.1 200 OK\r\n", True),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n", False),
    (b"HTTP/1.0 200 OK\r\n", False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n", True),
])
def test_keep_alive_vs_connection_close(head, keep):
    resp, ex = exchange()
    assert ex.feed(1, head + JSON + b"Content-Length: 2\r\n\r\n{}") == DONE
    assert resp.keep_alive is keep and resp.reusable is keep


def test_keep_alive_timeout_gives_the_window_less_one_second():
    resp, ex = exchange()
    ex.feed(1, b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 0\r\n\r\n")
    assert ex.keepalive_s == 4.0


# ---------------------------------------------------------------- bounds
def test_headers_over_the_bound_are_too_large():
    resp, ex = exchange(max_header_bytes=64)
    r = ex.feed(1, b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100)
    assert r == FAILED and resp.error_kind == "too_large" and "max_header_bytes" in resp.error


def test_a_1xx_storm_counts_against_the_header_bound():
    resp, ex = exchange(max_header_bytes=100)
    r = feed_all(ex, *[b"HTTP/1.1 103 Early Hints\r\n\r\n"] * 6)
    assert r[-1] == FAILED and resp.error_kind == "too_large"


def test_endless_trailers_are_too_large():
    resp, ex = exchange(max_header_bytes=64)
    ex.feed(1, b"HTTP/1.1 200 OK\r\n" + SSE + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n")
    r = feed_all(ex, *[b"X-T: 0123456789\r\n"] * 6, t0=2)
    assert r[-1] == FAILED and resp.error_kind == "too_large" and "trailers" in resp.error
    assert resp.body() == b"abc"


def test_a_whole_body_over_its_content_length_bound_fails_at_once():
    resp, ex = exchange(max_body_bytes=10, stream=False)
    r = ex.feed(1, b"HTTP/1.1 200 OK\r\n" + JSON + b"Content-Length: 11\r\n\r\n")
    assert r == FAILED and resp.error_kind == "too_large" and "Content-Length 11" in resp.error


def test_a_stream_held_over_hold_bytes_spills():
    resp, ex = exchange(hold_bytes=8, stream=True)
    r = ex.feed(1, b"HTTP/1.1 200 OK\r\n" + SSE + b"\r\n" + b"data: 123456789\n\n")
    assert r == SPILL and resp.held > 8


def test_bad_framing_is_protocol():
    resp, ex = exchange()
    assert ex.feed(1, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == FAILED
    assert resp.error_kind == "protocol"


def test_the_first_failure_stays():
    resp, ex = exchange()
    ex.feed(1, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    assert ex.fail("timeout", "late", 2) == FAILED
    assert ex.eof(3) == FAILED and resp.error_kind == "timeout" and resp.end_at_ns == 2


def test_done_grace_over_ends_the_exchange_not_reused():
    resp, ex = exchange()
    ex.feed(1, b"HTTP/1.1 200 OK\r\n" + SSE + b"Transfer-Encoding: chunked\r\n\r\n")
    assert ex.finish_after_done() == DONE and not resp.keep_alive and ex.over
