"""Redirects are never followed silently: the pure rule of what a 3xx answer may lead to, and
the hop loop every driver runs through it. No I/O.

    status, Location, api.follow_redirects ─► redirect_target ─► the next URL, or None (the
    request fails as ``redirect``, its Location in the error: ``redirect_message``)
    route(url, policy) ─► Hops: the one call the drivers (wire, gevent_wire, aiohttp) make;
        the hop loop, its state, its counting and its limit (MAX_HOPS) live here only; the
        drivers keep only their I/O:
        for url in route(url, policy):         # the first URL, then each followed hop's
            send to url ... ; hops.answered(status, location)
        (the iteration ends once an answer stands: that answer is the request's)
    The redirect statuses are named here and in client/settle.py (a 3xx not followed fails the
    request as ``redirect``; its body is never the error snippet: ``settle.error_body``).

``never`` (default): no redirect is followed. ``same-host``: a 307/308 (the method and body are
kept, so the prompt is POSTed again) to the same scheme, host and port is followed, up to
``MAX_HOPS``; a 301/302/303 would turn the POST into a GET and is never followed. No header ever
goes to another host, because no request ever does. After ``MAX_HOPS`` hops the last answer
stands (a 3xx then fails the request as ``redirect``).
"""
from __future__ import annotations

from typing import Iterator, Optional
from urllib.parse import urljoin, urlsplit

MAX_HOPS = 3
REDIRECTS = (301, 302, 303, 307, 308)
POLICIES = ("never", "same-host")
FOLLOWABLE = (307, 308)


def _origin(url: str) -> tuple:
    u = urlsplit(url)
    default = {"http": 80, "https": 443}.get(u.scheme)
    return (u.scheme, (u.hostname or "").lower(), u.port or default)


def redirect_target(url: str, status: Optional[int], location: Optional[str],
                    policy: str = "never") -> Optional[str]:
    """The URL to POST to next, or None when this answer is final (not a redirect, or one that
    the policy does not follow)."""
    if policy != "same-host" or status not in FOLLOWABLE or not location:
        return None
    nxt = urljoin(url, location.strip())
    return nxt if _origin(nxt) == _origin(url) else None


def redirect_message(status: int, location: Optional[str]) -> str:
    """The ``redirect`` failure's message: the status and where it pointed."""
    return (f"HTTP {status} redirect to {location or '(no Location)'}: not followed "
            "(api.follow_redirects: same-host follows a 307/308 to the same host)")


class Hops:
    """One request's hop loop (module doc): iterating gives the URLs to send to, in order;
    ``answered`` says what the answer just read leads to. ``url`` is where the next send goes;
    ``follow`` is the rule of one answer (moves ``url`` when it leads to another send)."""

    __slots__ = ("url", "policy", "hops", "_more")

    def __init__(self, url: str, policy: str = "never"):
        self.url, self.policy, self.hops, self._more = url, policy, 0, False

    def __iter__(self) -> Iterator[str]:
        """The first URL, then, while ``answered`` says an answer leads on, the next; an answer
        not reported ends it (never a send the rule did not ask for)."""
        self._more = True
        while self._more:
            self._more = False
            yield self.url

    def answered(self, status: Optional[int], location: Optional[str]) -> bool:
        """The answer from the URL just yielded: True when it leads to another send (the
        iteration goes on to the next URL), False when it stands (the iteration ends)."""
        self._more = self.follow(status, location)
        return self._more

    def follow(self, status: Optional[int], location: Optional[str]) -> bool:
        if self.hops >= MAX_HOPS:
            return False
        nxt = redirect_target(self.url, status, location, self.policy)
        if nxt is None:
            return False
        self.url, self.hops = nxt, self.hops + 1
        return True


def route(url: str, policy: str = "never") -> Hops:
    """One request's hops from ``url`` under ``api.follow_redirects`` ``policy``: the drivers'
    one call (module doc)."""
    return Hops(url, policy)
