"""The connection policy and the redirect hops of loadgen.client.http1, fed answers directly:
reuse, keep-alive window, the one stale resend and stop-reuse after it, release, the deadlines
it returns (load.cancel's timed hang-up, the [DONE] grace), redirect hops. No socket, no loop."""
from __future__ import annotations

import pytest

from loadgen.client.hangup import Hangup
from loadgen.client.http1.exchange import DONE, FAILED, Exchange
from loadgen.client.http1.message import WireResponse
from loadgen.client.http1.policy import (DONE_GRACE, DONE_GRACE_S, ConnPolicy, Idle, Release,
                                         hangup_deadline, parses_inline)
from loadgen.client.http1.redirects import MAX_HOPS, Hops

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Socket:
    """A connection as the policy sees it: reused or fresh, and the answer bytes it gives
    (b"" = EOF before any byte)."""

    def __init__(self, answer: bytes, reused: bool):
        self.answer, self.reused = answer, reused


def run_request(policy: ConnPolicy, sockets: list) -> tuple:
    """The drivers' attempt loop over ``sockets`` (the idle one first, if any): what was sent
    (Connection: close?) and the response."""
    resp, sent = WireResponse(), []
    for attempt in (0, 1):
        s = sockets.pop(0)
        sent.append(policy.connection_close())
        resp.sent_at_ns = 10 + attempt
        ex = Exchange(resp, reused=s.reused)
        if s.answer:
            ex.feed(attempt + 1, s.answer)
        else:
            ex.eof(attempt + 1)
        if not policy.resend(resp, attempt):
            break
    return sent, resp


# ---------------------------------------------------------------- reuse and the window
def test_an_idle_socket_within_its_window_is_taken():
    p = ConnPolicy(keepalive_s=4.0)
    assert p.take(0, 3.9, 4.0) is Idle.TAKE
    assert p.take(0, 4.1, 4.0) is Idle.DROP          # past the window: reconnect
    assert p.take(1, 0.0, 4.0) is Idle.DROP          # a resend always goes fresh


def test_release_parks_only_a_whole_keep_alive_answer():
    p = ConnPolicy()
    whole = WireResponse(complete=True, keep_alive=True)
    assert p.release(whole, 4.0) is Release.PARK
    assert p.release(whole, 4.0, closed=True) is Release.CLOSE
    assert p.release(whole, 0.0) is Release.CLOSE    # Keep-Alive: timeout=1 ─► window 0
    assert p.release(WireResponse(complete=True), 4.0) is Release.CLOSE    # Connection: close
    assert p.release(WireResponse(keep_alive=True), 4.0) is Release.CLOSE  # failed / cut short


def test_the_server_keep_alive_timeout_narrows_the_window():
    assert ConnPolicy.window(4.0, None) == 4.0
    assert ConnPolicy.window(4.0, 1.0) == 1.0 and ConnPolicy.window(4.0, 9.0) == 4.0


# ---------------------------------------------------------------- stale resend
def test_stale_reused_connection_is_resent_once_fresh_then_reuse_stops():
    p = ConnPolicy()
    sent, resp = run_request(p, [Socket(b"", reused=True), Socket(OK, reused=False)])
    assert sent == [False, True]                     # the resend says Connection: close
    assert resp.status == 200 and resp.complete and resp.error_kind is None
    assert resp.retries == 1 and resp.first_sent_at_ns == 10 and resp.sent_at_ns == 11
    assert resp.retry_error and "before the status line" in resp.retry_error
    assert p.retries == 1 and p.reuse is False and p.connection_close()
    assert p.take(0, 0.0, 4.0) is Idle.DROP          # no more reuse
    assert p.release(WireResponse(complete=True, keep_alive=True), 4.0) is Release.CLOSE


def test_stale_twice_is_resent_once_only():
    p = ConnPolicy()
    sent, resp = run_request(p, [Socket(b"", reused=True), Socket(b"", reused=True)])
    assert len(sent) == 2 and resp.error_kind == "connection" and resp.retries == 1


def test_a_fresh_connection_failure_is_never_resent():
    p = ConnPolicy()
    sent, resp = run_request(p, [Socket(b"", reused=False), Socket(OK, reused=False)])
    assert sent == [False] and resp.error_kind == "connection" and resp.retries == 0
    assert p.retries == 0 and p.reuse


def test_a_failure_after_the_first_byte_is_never_resent():
    p = ConnPolicy()
    sent, resp = run_request(p, [Socket(b"HTTP/1.1 2", reused=True), Socket(OK, reused=False)])
    assert sent == [False] and resp.status is None and resp.retries == 0


def test_reuse_goes_on_when_stop_reuse_after_retry_is_off():
    p = ConnPolicy(stop_reuse_after_retry=False)
    run_request(p, [Socket(b"", reused=True), Socket(OK, reused=False)])
    assert p.retries == 1 and p.reuse and not p.connection_close()


def test_two_requests_on_one_keep_alive_socket():
    p = ConnPolicy()
    for reused in (False, True):
        sent, resp = run_request(p, [Socket(OK, reused=reused)])
        assert sent == [False] and resp.complete
        assert p.release(resp, 4.0) is Release.PARK


# ---------------------------------------------------------------- deadlines returned
def test_hangup_after_ms_is_a_deadline_from_the_send():
    h = Hangup(after_ms=500.0)
    d = hangup_deadline(h, sent_at_ns=1_000_000_000, now=1_200_000_000)
    assert d.kind == "aborted" and d.left_s == pytest.approx(0.3) and "500" in d.message


def test_hangup_after_ms_counts_from_the_first_send_on_a_retry():
    h = Hangup(after_ms=500.0, since_ns=0)
    assert hangup_deadline(h, sent_at_ns=10**9, now=10**9).left_s == 0.0    # already due


def test_no_timed_hangup_no_deadline():
    assert hangup_deadline(None, 0, 0) is None
    assert hangup_deadline(Hangup(after_tokens=3), 0, 0) is None
    assert parses_inline(Hangup(after_tokens=3)) and not parses_inline(Hangup(after_ms=1.0))
    assert not parses_inline(None)


def test_done_grace_is_a_deadline():
    assert DONE_GRACE.left_s == DONE_GRACE_S == 0.25


# ---------------------------------------------------------------- redirects
BASE = "http://h:8000/v1/chat/completions"


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_redirect_that_would_turn_the_post_into_a_get_is_never_followed(status):
    hops = Hops(BASE, "same-host")
    assert not hops.follow(status, "/v2/chat/completions") and hops.url == BASE


@pytest.mark.parametrize("status", [307, 308])
def test_307_308_to_the_same_host_are_followed_by_same_host_only(status):
    assert not Hops(BASE, "never").follow(status, "/v2")
    hops = Hops(BASE, "same-host")
    assert hops.follow(status, "/v2/x") and hops.url == "http://h:8000/v2/x" and hops.hops == 1


@pytest.mark.parametrize("location", ["http://other:8000/v1", "https://h:8000/v1",
                                      "http://h:8001/v1", None, ""])
def test_cross_origin_or_missing_location_is_refused(location):
    hops = Hops(BASE, "same-host")
    assert not hops.follow(307, location) and hops.url == BASE


def test_the_hop_limit():
    hops = Hops(BASE, "same-host")
    assert [hops.follow(307, f"/hop{i}") for i in range(MAX_HOPS + 1)] == [True] * MAX_HOPS + [False]
    assert hops.url == f"http://h:8000/hop{MAX_HOPS - 1}"


def test_a_redirect_answer_fed_as_bytes_then_followed():
    resp = WireResponse()
    ex = Exchange(resp)
    assert ex.feed(1, b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /v2\r\n"
                      b"Content-Length: 0\r\n\r\n") == DONE
    hops = Hops(BASE, "same-host")
    assert hops.follow(resp.status, resp.headers.get("location")) and hops.url == "http://h:8000/v2"
    assert resp.reusable                              # the 3xx answer itself ended whole


def test_an_answer_that_is_not_a_redirect_ends_the_hops():
    hops = Hops(BASE, "same-host")
    resp = WireResponse()
    assert Exchange(resp).feed(1, OK) == DONE
    assert not hops.follow(resp.status, resp.headers.get("location")) and hops.hops == 0


def test_a_failed_answer_ends_the_hops():
    resp = WireResponse()
    ex = Exchange(resp)
    assert ex.feed(1, b"HTTP/1.1 307 T") == 0 and ex.eof(2) == FAILED
    assert not Hops(BASE, "same-host").follow(resp.status, resp.headers.get("location"))
