"""Redirects are never followed silently: the pure rule of what a 3xx answer may lead to.

    status, Location, api.follow_redirects ─► redirect_target ─► the next URL, or None (the
    request fails as ``redirect``, its Location in the error)

``never`` (default): no redirect is followed. ``same-host``: a 307/308 (the method and body are
kept, so the prompt is POSTed again) to the same scheme, host and port is followed, up to
``MAX_HOPS``; a 301/302/303 would turn the POST into a GET and is never followed. No header ever
goes to another host, because no request ever does.
"""
from __future__ import annotations

from typing import Optional
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
