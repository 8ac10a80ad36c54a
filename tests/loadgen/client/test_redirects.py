"""Redirects are never followed silently (loadgen/client/http1/redirects.py)."""
from __future__ import annotations

import pytest

from loadgen.client.http1.exchange import DONE, FAILED, Exchange
from loadgen.client.http1.message import WireResponse
from loadgen.client.http1.redirects import MAX_HOPS, redirect_message, redirect_target, route

URL = "http://127.0.0.1:8000/v1/completions"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_never_follows_by_default(status):
    assert redirect_target(URL, status, "/v1/other", "never") is None


@pytest.mark.parametrize("status,location,want", [
    (307, "/v2/completions", "http://127.0.0.1:8000/v2/completions"),
    (308, "http://127.0.0.1:8000/x", "http://127.0.0.1:8000/x"),
    (307, "http://127.0.0.1:8001/x", None),      # another port: another server
    (307, "http://localhost:8000/x", None),      # another host name
    (307, "https://127.0.0.1:8000/x", None),     # another scheme
    (302, "/v2/completions", None),              # would turn the POST into a GET
    (200, "/v2/completions", None),
    (307, None, None),
])
def test_same_host_follows_only_307_308_to_the_same_origin(status, location, want):
    assert redirect_target(URL, status, location, "same-host") == want


def test_the_message_names_the_location_and_the_option():
    msg = redirect_message(307, "http://127.0.0.1:9/x")
    assert "307" in msg and "http://127.0.0.1:9/x" in msg and "api.follow_redirects" in msg


# ---- the hop loop every driver drives: ``for url in route(...)``, ``hops.answered`` ----------
def _307(to: str) -> bytes:
    return f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n".encode()


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def drive(policy: str, answers: list) -> tuple[list, WireResponse]:
    """A driver with its I/O replaced by bytes: each send gets the next answer, fed whole (or
    cut short: ``(bytes, "eof")``). Returns the URLs sent to and the answer that stood."""
    sent, it = [], iter(answers)
    hops = route(URL, policy)
    for url in hops:
        sent.append(url)
        resp, raw = WireResponse(), next(it)
        ex = Exchange(resp)
        if isinstance(raw, tuple):
            assert ex.feed(1, raw[0]) == 0 and ex.eof(2) == FAILED
        else:
            assert ex.feed(1, raw) == DONE
        hops.answered(resp.status, resp.headers.get("location"))
    return sent, resp


def test_an_answer_that_stands_is_the_only_send():
    sent, resp = drive("same-host", [OK, OK])
    assert sent == [URL] and resp.status == 200


def test_same_host_307s_are_followed_in_order_then_the_answer_stands():
    sent, resp = drive("same-host", [_307("/v2"), _307("http://127.0.0.1:8000/v3"), OK])
    assert sent == [URL, "http://127.0.0.1:8000/v2", "http://127.0.0.1:8000/v3"]
    assert resp.status == 200


def test_never_sends_once_and_the_3xx_stands():
    sent, resp = drive("never", [_307("/v2"), OK])
    assert sent == [URL] and (resp.status, resp.headers.get("location")) == (307, "/v2")


def test_a_loop_stops_after_max_hops_with_the_last_3xx():
    sent, resp = drive("same-host", [_307(f"/hop{i}") for i in range(MAX_HOPS + 2)])
    assert len(sent) == MAX_HOPS + 1 and resp.status == 307


def test_a_cross_host_hop_or_a_cut_answer_ends_the_loop():
    assert drive("same-host", [_307("http://other:8000/v1"), OK])[0] == [URL]
    sent, resp = drive("same-host", [(b"HTTP/1.1 307 T", "eof"), OK])
    assert sent == [URL] and resp.status is None


def test_an_answer_never_reported_sends_nothing_more():
    hops = route(URL, "same-host")
    assert list(hops) == [URL]          # a driver that forgot ``answered``: one send, not a loop
