"""The connection policy of one HTTP/1.1 client, sans I/O: what a driver does with its sockets
between exchanges, and the deadlines it arms during one. No sockets, no asyncio, no gevent.

    ConnPolicy (one per client: the asyncio WirePool, a Locust user's GWire, aiohttp)
        take(attempt, idle_for_s, window_s) ─► TAKE the idle keep-alive socket | DROP it
                           (outside its keep-alive window, reuse stopped, a resend: fresh)
        connection_close() ─► send ``Connection: close`` (reuse stopped)
        resend(resp, attempt) ─► True once: the attempt failed on a REUSED socket before any
                           byte of the answer (``resp.stale``: it never reached the server);
                           the retry is counted on ``resp`` and here, and from then on no reuse
                           when ``stop_reuse_after_retry``. A fresh socket's failure: never.
        stale() ─► the same count for a driver that finds staleness itself (aiohttp)
        release(resp, window_s) ─► PARK (idle, reusable) | CLOSE
    PolicyCounts (mixed into every driver that holds a ConnPolicy as ``policy``: WirePool,
        WireTransport, GWire, AiohttpTransport) ─► retries (stale resends so far),
        reuse_connections (False after one): the counts the run's meta shows, read one way
    deadlines (returned, never armed here: the driver's timer, gevent wait or asyncio.timeout)
        hangup_deadline(hangup, sent_at_ns, now) ─► Deadline(left_s, "aborted", message) for
                           load.cancel's timed hang-up (from the first send), else None: the
                           rule is the Hangup's own (loadgen.client.hangup, ``deadline``)
        DONE_GRACE: after the stream's [DONE] the message end is awaited ``DONE_GRACE_S``
                           at most (Exchange.finish_after_done then ends it, not reused)
    parses_inline(hangup) ─► load.cancel's token hang-up: the stream is parsed as it is read
                           (tokens counted on the read path), not after the exchange
Redirect hops: redirects.route. Framing, bounds, EOF, stale detection: exchange.Exchange.
"""
from __future__ import annotations

from enum import Enum
from typing import NamedTuple, Optional

KEEPALIVE_S = 4.0             # below uvicorn's 5 s keep-alive: never reuse a socket the server closes
DONE_GRACE_S = 0.25           # after [DONE]: the longest wait for the HTTP message's end


class Idle(Enum):
    """What to do with an idle keep-alive socket when a request wants one."""
    TAKE = "take"
    DROP = "drop"


class Release(Enum):
    """What to do with a socket whose exchange is over."""
    PARK = "park"
    CLOSE = "close"


class Deadline(NamedTuple):
    """A deadline for the driver to arm: ``left_s`` from now, then fail the exchange as
    ``kind`` with ``message``."""
    left_s: float
    kind: str
    message: str


DONE_GRACE = Deadline(DONE_GRACE_S, "done", "[DONE] seen, the message end not within the grace")


class ConnPolicy:
    """Reuse, the keep-alive window and the one stale resend of one client (module doc)."""

    __slots__ = ("keepalive_s", "stop_reuse_after_retry", "reuse", "retries")

    def __init__(self, keepalive_s: float = KEEPALIVE_S, stop_reuse_after_retry: bool = True):
        self.keepalive_s = keepalive_s
        self.stop_reuse_after_retry = stop_reuse_after_retry
        self.reuse = True             # False after a stale resend (stop_reuse_after_retry)
        self.retries = 0              # stale-connection resends so far

    def wants_idle(self, attempt: int) -> bool:
        """Whether this attempt may look for an idle socket at all (a resend goes fresh)."""
        return attempt == 0 and self.reuse

    def take(self, attempt: int, idle_for_s: float, window_s: float) -> Idle:
        """An idle socket, ``idle_for_s`` parked, its window ``window_s``: take it or drop it."""
        if not self.wants_idle(attempt) or idle_for_s > window_s:
            return Idle.DROP
        return Idle.TAKE

    def connection_close(self) -> bool:
        """The request says ``Connection: close`` (reuse stopped)."""
        return not self.reuse

    def resend(self, resp, attempt: int) -> bool:
        """After an attempt: send once more on a fresh socket? (module doc)"""
        if attempt != 0 or not resp.stale:
            return False
        resp.retry_fresh()
        self.stale()
        return True

    def stale(self) -> None:
        """A stale socket cost a resend: counted; reuse stops when so configured."""
        self.retries += 1
        if self.stop_reuse_after_retry:
            self.reuse = False

    def release(self, resp, window_s: float, closed: bool = False) -> Release:
        """The exchange is over: park the socket when the answer ended whole on a keep-alive
        connection, reuse goes on and the window is open; else close it."""
        if closed or not resp.reusable or not self.reuse or window_s <= 0:
            return Release.CLOSE
        return Release.PARK

    @staticmethod
    def window(window_s: float, server_keepalive_s: Optional[float]) -> float:
        """The socket's keep-alive window after an answer: the smaller of ours and the server's
        ``Keep-Alive: timeout=N`` (exchange.Exchange.keepalive_s, N − 1 s)."""
        return window_s if server_keepalive_s is None else min(window_s, server_keepalive_s)


class PolicyCounts:
    """A driver's view of its ``policy`` (a ConnPolicy): what meta.json's connection block
    shows. The driver gives ``policy`` (an attribute or a property)."""

    __slots__ = ()

    @property
    def retries(self) -> int:
        """Stale-connection resends so far (the policy's count)."""
        return self.policy.retries

    @property
    def reuse_connections(self) -> bool:
        """False after a stale resend when reuse stops (stop_reuse_after_retry)."""
        return self.policy.reuse


def hangup_deadline(hangup, sent_at_ns: int, now: int) -> Optional[Deadline]:
    """load.cancel's timed hang-up (loadgen.client.hangup.Hangup.deadline): the time left from
    ``now`` for an attempt sent at ``sent_at_ns`` (the first attempt's send when api.retry
    retried), then ``aborted``; None for no hang-up or a token one."""
    return None if hangup is None else hangup.deadline(sent_at_ns, now)


def parses_inline(hangup) -> bool:
    """load.cancel's token hang-up: tokens must be counted as the stream is read."""
    return hangup is not None and hangup.counts_tokens
