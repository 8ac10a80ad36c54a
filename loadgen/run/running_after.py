"""load.cancel's server check: after the run, do the server's running requests return to 0?

    check(base_url, path, headers) ─► GET /metrics every POLL_S, up to WAIT_S ─► the first
        running-requests gauge found (RUNNING_GAUGES, summed over its label sets, read a line
        at a time, each value through the sanity gate) ─►
        {metric, value, waited_s, leaked, reason}   (meta.json ``running_after``)

A server that keeps generating for a client that hung up (or never frees its slot) still
reports running requests WAIT_S after the last answer: ``leaked`` true, and summary.json
warns (analysis.metrics.hangups). No /metrics, no gauge we know, or a gauge the sanity gate
refuses (analysis.server.sanity.gauge_text: ``NaN``, ``+Inf``, ``abc``): ``leaked`` None, ``value``
None, with the reason (the summary's ``cancel.leaked_reason``, the console line). Run by
harness.around once the load phase is over and before a managed server stops, for every
engine; only when load.cancel is set and target.scrape_metrics is on.
"""
from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from typing import Optional

from analysis.server import sanity

# the running-requests gauge of each server kind loadgen knows (docs/compatibility.md)
RUNNING_GAUGES = ("vllm:num_requests_running",       # vLLM, the JAX engine (servers/jax/metrics.py)
                  "sglang:num_running_reqs",          # SGLang
                  "llamacpp:requests_processing",     # llama.cpp's llama-server (--metrics)
                  "tgi_batch_current_size")           # text-generation-inference
WAIT_S = 10.0
POLL_S = 0.2


_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?[ \t]+(\S+)")


def read_running(text: str) -> Optional[tuple[str, sanity.Checked]]:
    """(gauge name, its value summed over label sets, through the gate) of the first known gauge
    in ``text``; a value that is not a finite number ≥ 0 (``NaN``, ``+Inf``, ``abc``) gives
    Checked(None, reason). A line at a time: one unreadable sample does not lose the others."""
    found: dict[str, sanity.Checked] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m is None or m.group(1) not in RUNNING_GAUGES:
            continue
        name = m.group(1)
        c = sanity.gauge_text(m.group(2), name)
        prev = found.get(name, sanity.Checked(0.0))
        found[name] = (c if not c.ok else prev if not prev.ok
                       else sanity.Checked(prev.value + c.value))
    for name in RUNNING_GAUGES:
        if name in found:
            return name, found[name]
    return None


def running(text: str) -> Optional[tuple[str, Optional[float]]]:
    """(gauge name, value summed over its label sets; None when refused by the gate)."""
    got = read_running(text)
    return None if got is None else (got[0], got[1].value)


def check(base_url: str, path: str = "/metrics", headers: Optional[dict] = None,
          wait_s: float = WAIT_S, timeout_s: float = 5.0) -> dict:
    url = base_url.rstrip("/") + path
    t0 = time.monotonic()
    last: Optional[tuple[str, float]] = None
    try:
        while True:
            req = urllib.request.Request(url, headers=dict(headers or {}))
            try:
                with urllib.request.urlopen(req, timeout=timeout_s) as r:
                    text = r.read(64 * 2**20).decode("utf-8", "replace")
            except (urllib.error.URLError, OSError, ValueError) as e:
                return _out(None, None, t0, None, f"GET {path}: {type(e).__name__}: {e}"[:300])
            got = read_running(text)
            if got is None:
                return _out(None, None, t0, None, f"GET {path}: no running-requests gauge "
                            f"({', '.join(RUNNING_GAUGES)})")
            if not got[1].ok:
                return _out(got[0], None, t0, None, f"GET {path}: {got[1].reason}: whether the "
                            "server freed the slots is unknown")
            last = (got[0], got[1].value)
            if last[1] <= 0:
                return _out(last[0], last[1], t0, False, None)
            if time.monotonic() - t0 >= wait_s:
                return _out(last[0], last[1], t0, True,
                            f"still {last[1]:g} running after {wait_s:g} s")
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        return _out(last[0] if last else None, last[1] if last else None, t0, None,
                    "interrupted before the check ended")


def _out(metric, value, t0: float, leaked, reason) -> dict:
    return {"metric": metric, "value": value, "waited_s": round(time.monotonic() - t0, 3),
            "leaked": leaked, "reason": reason}


def after_load(run, base_url: str) -> Optional[dict]:
    """harness.around's step: the check when load.cancel asks for it (meta.json
    ``running_after``), else None; ``run`` is read, never written."""
    sc = run.sc
    if sc.load.cancel is None or not sc.target.scrape_metrics or run.interrupted or run.hurry:
        return None
    headers = dict(sc.api.headers)
    if getattr(run, "key", None):
        headers["Authorization"] = f"Bearer {run.key}"
    return check(base_url, sc.target.metrics_path, headers)


def console_line(summary: dict) -> Optional[str]:
    """The console's line for load.cancel and api.retry (None when neither did anything)."""
    parts = []
    c = summary.get("cancel") or {}
    if summary.get("requests_aborted") or c:
        parts.append(f"aborted (load.cancel): {summary.get('requests_aborted') or 0}")
        after = c.get("server_running_after") or {}
        value = sanity.gauge(after.get("value")).value
        if after and (after.get("leaked") is None or value is None):
            why = c.get("leaked_reason") or after.get("reason") or "no reason recorded"
            parts.append(f"server running after: unknown ({why})")
        elif after:
            parts.append(f"server running after: {value:g} "
                         f"({'LEAKED' if after['leaked'] else 'freed'})")
    r = summary.get("retries") or {}
    if r.get("requests"):
        parts.append(f"retried (api.retry): {r['requests']} request(s), {r['attempts']} "
                     f"attempts, {r['wait_s']:.2f} s waiting")
    return "   ".join(parts) or None
