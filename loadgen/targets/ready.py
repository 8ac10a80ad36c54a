"""Ready before measured: wait until the target serves, with a live line on stderr.

    base URL ─► wait_ready() (first; bounded by api.ready_timeout_s: 600 s for a managed server,
                              120 s for target.url; 0 = one look, no waiting)
        GET /v1/models   HTTP 503 (llama-server "Loading model")         ─► not ready: wait
        GET /health      (target.server.health_path when managed)
                         200 ─► ready │ 5xx ─► not ready: wait │ 4xx ─► no such route: not
                         asked again
        connection refused before anything answered (``loadgen serve ... &`` then ``loadgen run``
                         at once: the port is not bound yet) ─► one line "waiting up to N s
                            (api.ready_timeout_s) for <url>: connection refused (nothing listens
                            there yet)", then wait for the port within the same timeout
        no such host, a timeout, any other error before anything answered
                         ─► returned at once: probe.check_models says "cannot reach" (a wrong host
                            must not cost the timeout); after an answer: a restart, wait
        api.ready_timeout_s 0 ─► one look: a refusal is returned at once too
        ─► (the /v1/models answer, the ReadyWait) ─► probe.check_models, probe.probe_request
    probe.probe_request: HTTP 503 ("warming up", queue full) ─► ReadyWait.pause: waits on the
        same deadline (never "went ahead")
    deadline passed ─► ProbeError "api.ready_timeout_s: ...": one line, exit 2 (nothing measured)

    while waiting ─► LiveLine "waiting for <url> to be ready (n s): <last status>" on stderr:
        a terminal: one line rewritten ~1/s, cleared when done; otherwise plain lines every 10 s
    ReadyWait.describe() ─► meta.json probe.ready {timeout_s, waited_s, checks, last}

``LiveLine`` is also managed.py's "starting jax server (23 s): <server.log's last line>".
"""
from __future__ import annotations

import asyncio
import shutil
import sys
import time
from typing import Callable, Optional, TextIO, Union

import aiohttp

from loadgen.targets.reach import (REFUSED, ProbeError, body_message, fetch_models, one_line,
                                  request_headers)

MANAGED_READY_TIMEOUT_S = 600.0     # a managed server may still compile after /health (sweeps)
EXTERNAL_READY_TIMEOUT_S = 120.0
TTY_EVERY_S = 1.0                   # a terminal's line is rewritten this often
PLAIN_EVERY_S = 10.0                # elsewhere (CI logs): one plain line this often, from 10 s on
FIRST_PAUSE_S, MAX_PAUSE_S = 0.05, 1.0   # between looks: doubling from the first to the most


def ready_timeout_s(api, managed: bool) -> float:
    """api.ready_timeout_s, else the default for the kind of target."""
    given = getattr(api, "ready_timeout_s", None)
    if given is not None:
        return float(given)
    return MANAGED_READY_TIMEOUT_S if managed else EXTERNAL_READY_TIMEOUT_S


def _isatty(out: TextIO) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


class LiveLine:
    """``"<what> (<n> s): <detail>"`` on ``out`` (stderr) while something is awaited. On a
    terminal the line is rewritten at most every TTY_EVERY_S and cleared by ``close()``; elsewhere
    a plain line at PLAIN_EVERY_S, 2×PLAIN_EVERY_S, ... (a quick wait prints nothing)."""

    def __init__(self, what: str, out: Optional[TextIO] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.what, self.out, self.clock = what, out if out is not None else sys.stderr, clock
        self.tty = _isatty(self.out)
        self.t0 = clock()
        self.next_at = self.t0 + (0.0 if self.tty else PLAIN_EVERY_S)
        self.shown = False          # a terminal line is on screen

    def elapsed_s(self) -> float:
        return self.clock() - self.t0

    def update(self, detail: Union[str, Callable[[], str]]) -> bool:
        """Show the line when one is due (``detail`` may be a callable: only called then)."""
        now = self.clock()
        if now < self.next_at:
            return False
        text = detail() if callable(detail) else detail
        line = f"{self.what} ({int(now - self.t0)} s)" + (f": {text}" if text else "")
        try:
            if self.tty:
                width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
                self.out.write("\r\x1b[2K" + line[:width])
                self.shown = True
                self.next_at = now + TTY_EVERY_S
            else:
                self.out.write(line + "\n")
                self.next_at = now + PLAIN_EVERY_S
            self.out.flush()
        except (OSError, ValueError):   # a closed stderr never stops the run
            return False
        return True

    def close(self) -> None:
        """Clear a terminal line (idempotent); plain lines stay."""
        if self.tty and self.shown:
            try:
                self.out.write("\r\x1b[2K")
                self.out.flush()
            except (OSError, ValueError):
                pass
        self.shown = False


class ReadyWait:
    """One readiness budget shared by wait_ready and the probe request."""

    def __init__(self, url: str, timeout_s: float, out: Optional[TextIO] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.url, self.timeout_s, self.clock = url, float(timeout_s), clock
        self.live = LiveLine(f"waiting for {url} to be ready", out, clock)
        self.deadline = clock() + self.timeout_s
        self.checks = 0             # looks that found the target not ready
        self.last: Optional[str] = None
        self.pause_s = FIRST_PAUSE_S

    async def pause(self, reason: str) -> None:
        """The target is not ready (``reason``): show it and sleep a little; ProbeError once the
        deadline has passed."""
        self.checks += 1
        self.last = reason
        self.live.update(reason)
        left = self.deadline - self.clock()
        if left <= 0:
            self.close()
            raise ProbeError(
                f"api.ready_timeout_s: {self.url} was not ready after {self.timeout_s:g} s "
                f"(last: {reason}); wait for the server, or raise api.ready_timeout_s")
        await asyncio.sleep(min(self.pause_s, left))
        self.pause_s = min(self.pause_s * 2, MAX_PAUSE_S)

    def say(self, line: str) -> None:
        """One plain line on the live line's stream (a closed stderr never stops the run)."""
        try:
            self.live.out.write(line + "\n")
            self.live.out.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        self.live.close()

    def describe(self) -> dict:
        return {"timeout_s": self.timeout_s, "waited_s": round(self.live.elapsed_s(), 3)
                if self.checks else 0.0, "checks": self.checks, "last": self.last}


async def _status(url: str, headers: dict, timeout_s: float) -> tuple[Optional[int], str]:
    """(HTTP status, a short body) of GET url; (None, the error) when nothing answered."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s),
                                         trust_env=False) as s:
            async with s.get(url, headers=headers, allow_redirects=False) as r:
                raw = await r.content.read(2048)
                return r.status, body_message(raw.decode("utf-8", "replace"))
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError, TimeoutError) as e:
        return None, one_line(f"{type(e).__name__}: {e}")


async def wait_ready(base_url: str, api_key: Optional[str], headers: Optional[dict],
                     connect_timeout_s: float, timeout_s: float, health_path: str = "/health",
                     out: Optional[TextIO] = None) -> tuple[dict, ReadyWait]:
    """Wait until GET /v1/models is not 503 and GET ``health_path`` (where the server has one)
    is 200; see the module doc. Returns the last /v1/models answer (``reach.fetch_models``'s
    dict) and the ReadyWait, for the probe request to go on with."""
    base = base_url.rstrip("/")
    wait = ReadyWait(base, timeout_s, out)
    ask_health, answered = True, False
    while True:
        models = await fetch_models(base, api_key, connect_timeout_s, headers)
        status, reason = models.get("status"), None
        if status is None:
            refused = models.get("cause") == REFUSED
            if not answered and not (refused and timeout_s > 0):
                break            # nothing there: check_models names the URL and the cause
            if not answered and wait.checks == 0:     # the port is not bound yet: say so once
                wait.say(f"waiting up to {timeout_s:g} s (api.ready_timeout_s) for {base}: "
                         "connection refused (nothing listens there yet)")
            reason = f"GET /v1/models: {models.get('cause') or models.get('error')}"
        else:
            answered = True
            if status == 503:
                body = f" ({models['body']})" if models.get("body") else ""
                reason = f"GET /v1/models: HTTP 503{body}"
        if reason is None and ask_health:
            code, text = await _status(base + health_path, request_headers(api_key, headers),
                                       connect_timeout_s)
            if code is None:
                reason = f"GET {health_path}: {text}"
            elif code >= 500:
                reason = f"GET {health_path}: HTTP {code}" + (f" ({text})" if text else "")
            elif code != 200:
                ask_health = False    # 404 & co.: this server has no such route
        if reason is None:
            break
        await wait.pause(reason)
    wait.close()
    return models, wait
