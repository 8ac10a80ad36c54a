"""Reaching the target: GET /v1/models, and a failed answer or connection in one line.

    GET {url}/v1/models ─► fetch_models() ─► {"status", "models", "headers", "error", "cause", "body"}
        a failed connection ─► connection_cause(): "connection refused (nothing listens there)"
                               (REFUSED: ready.py waits for the port on it), "host name not found", ...
        an error body       ─► body_message() / server_message(): its message, on one line
    ProbeError: the target cannot serve this run (a ScenarioError: one line, exit 2)

Shared by probe.py (the checks before the run) and ready.py (the wait for readiness, whose
ReadyWait probe.py uses): both import this module, neither imports the other for it.
"""
from __future__ import annotations

import asyncio
import errno
import json
import re
from typing import Any, Optional

import aiohttp

from loadgen.scenario.strict import ScenarioError

SNIPPET = 200
REFUSED = "connection refused (nothing listens there)"   # ready.py waits for the port on this


class ProbeError(ScenarioError):
    """The target cannot serve this run; ``str()`` is one line naming the URL and the cause."""


def one_line(text: Any, limit: int = SNIPPET) -> str:
    return " ".join(str(text).split())[:limit]


_MESSAGE = re.compile(r'"(?:message|detail)"\s*:\s*"((?:[^"\\]|\\.)*)')


def body_message(body: str) -> str:
    """The message of a JSON error body (OpenAI, vLLM, FastAPI shapes; maybe cut short), else
    the text as it came, on one line."""
    text = one_line(body, 400)
    if text.startswith("{"):
        m = _MESSAGE.search(text)
        if m:
            try:
                return one_line(json.loads(f'"{m.group(1)}"'))
            except ValueError:
                return one_line(m.group(1))
    return text[:SNIPPET]


def server_message(error: Optional[str]) -> str:
    """A record's ``HTTP 400: {"error": {"message": "..."}}`` as ``HTTP 400: ...``."""
    head, sep, body = one_line(error or "", 400).partition(": ")
    return f"{head}: {body_message(body)}" if sep else body_message(head)


def connection_cause(e: BaseException, timeout_s: float) -> str:
    """A short human cause for a failed connection or request."""
    if isinstance(e, (asyncio.TimeoutError, TimeoutError, aiohttp.ServerTimeoutError)):
        return f"no answer within {timeout_s:g} s (api.connect_timeout_s)"
    dns = getattr(aiohttp, "ClientConnectorDNSError", None)
    if dns is not None and isinstance(e, dns):
        return "host name not found"
    if isinstance(e, aiohttp.ClientConnectorError):
        os_err = e.os_error
        if isinstance(os_err, ConnectionRefusedError) or getattr(os_err, "errno", None) == \
                errno.ECONNREFUSED:
            return REFUSED
        if isinstance(os_err, OSError) and os_err.strerror:
            return os_err.strerror.lower()
        return one_line(e)
    if isinstance(e, aiohttp.ServerDisconnectedError):
        return "the server closed the connection without an answer"
    return f"{type(e).__name__}: {one_line(e)}"


def request_headers(api_key: Optional[str], headers: Optional[dict]) -> dict:
    h = {"Accept-Encoding": "identity"}
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    h.update(headers or {})
    return h


async def fetch_models(base_url: str, api_key: Optional[str], timeout_s: float,
                       headers: Optional[dict] = None) -> dict:
    """GET {base_url}/v1/models (with api.headers). The keys of ``targets.sut.fetch_models``
    ({"status", "models", "headers", "error"}) plus "cause" (a short reason when it failed) and
    "body" (a snippet of a non-200 answer)."""
    from loadgen.targets.sut import keep_headers
    url = base_url.rstrip("/") + "/v1/models"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s),
                                         trust_env=False) as s:
            async with s.get(url, headers=request_headers(api_key, headers), allow_redirects=False) as r:
                raw = await r.read()
                body = None
                if r.status == 200:
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        body = None
                return {"status": r.status, "models": body, "headers": keep_headers(r.headers),
                        "error": None, "cause": None,
                        "body": None if r.status == 200 else body_message(
                            raw.decode("utf-8", "replace"))}
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError, TimeoutError) as e:
        return {"status": None, "models": None, "headers": {}, "body": None,
                "error": f"{type(e).__name__}: {e}", "cause": connection_cause(e, timeout_s)}
