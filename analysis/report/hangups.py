"""The report's and the console's view of requests that were more than one plain send: the
client hung up (load.cancel) or the request was sent again (api.retry).

    summary["requests_aborted"], ["cancel"] ─► aborted_blocks / aborted_line
        how many of the measured requests the client hung up on, TTFT of those that got a first
        token, tokens received, the server's running gauge after the run (freed or LEAKED)
    summary["retries"] {requests, attempts, wait_s} ─► retry_blocks / retry_line
        requests sent more than once, attempts, seconds spent waiting between attempts (TTFT
        and E2E of such a request count from its FIRST attempt's send, waits included)
Nothing when the run had none of them; a figure that is missing is "n/a: REASON", never 0.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.summary import Summary
from analysis.contract.summary_blocks import Cancel, RunningAfter
from analysis.report.render import Block, fmt, missing, num


def measured_total(s: Summary) -> int:
    """Measured requests that ended in a record: completed + failed + cancelled + aborted."""
    return s.requests_completed + s.requests_failed + s.requests_cancelled + s.requests_aborted


def counts(s: dict | Summary) -> tuple[str, str]:
    """The headline counts row: (label, value); "aborted" only when the client hung up on some."""
    s = Summary.read(s)
    n = [("completed", s.requests_completed), ("failed", s.requests_failed),
         ("cancelled", s.requests_cancelled)] + (
        [("aborted", s.requests_aborted)] if s.requests_aborted else [])
    return " / ".join(k for k, _ in n), " / ".join(str(v) for _, v in n)


def _after(a: Optional[RunningAfter]) -> str:
    """The server's running-requests gauge after the run (meta.json running_after)."""
    if a is None:
        return missing(None, "no check ran: it needs load.cancel and target.scrape_metrics")
    if a.leaked is None:
        return missing(a.reason, "not checked")
    state = "LEAKED: the server kept slots" if a.leaked else "freed"
    return f"{_g(a.value)} running ({a.metric}) after {_g(a.waited_s)} s: {state}"


def _g(x) -> str:
    return "n/a" if x is None else f"{x:g}"


def aborted_blocks(s: dict | Summary) -> list[Block]:
    s = Summary.read(s)
    n = s.requests_aborted
    if not n and not s.cancel:
        return []
    c = s.cancel or Cancel()
    t = c.ttft_ms
    ttft = (f"{fmt(t.p50)} / {fmt(t.p99)}" if t
            else missing("no aborted request got a first token" if n else "nothing was aborted"))
    rows = [["requests the client hung up on (status aborted)", f"{n} of {measured_total(s)}",
             "measured"],
            ["of those, with a first token", str(c.with_first_token), "measured"],
            ["TTFT p50 / p99 of the aborted requests (ms, from send)", ttft, "measured"],
            ["output tokens received before hanging up", str(c.output_tokens_received),
             "measured"],
            ["server's running requests after the run", _after(c.server_running_after),
             "measured (/metrics)"]]
    return [("h", "Client hang-ups (load.cancel)"),
            ("table", ["figure", "value", "evidence"], rows),
            ("p", "Aborted requests are neither failures nor cancellations: the verdict does not "
                  "count them, and the latency figures above are over completed requests only "
                  "(an aborted request's end is the client's, not the server's).")]


def retry_blocks(s: dict | Summary) -> list[Block]:
    s = Summary.read(s)
    n = s.retries.requests if s.retries else 0
    if not n:
        return []
    att, wait = s.retries.attempts, s.retries.wait_s
    rows = [["requests sent more than once (api.retry)", f"{n} of {measured_total(s)}", "measured"],
            ["attempts of those requests in all (mean per request)",
             f"{att} ({num(att / n if att is not None else None)})", "measured"],
            ["time spent waiting between attempts (s; mean per request)",
             f"{num(wait)} ({num(wait / n if wait is not None else None)})", "measured"]]
    return [("h", "Retries (api.retry)"),
            ("table", ["figure", "value", "evidence"], rows),
            ("p", "A retried request's TTFT and E2E count from its FIRST attempt's send, so the "
                  "waits above are inside them (every attempt is in the record's attempt_log).")]


def aborted_line(s: dict | Summary) -> Optional[str]:
    """The console's line for load.cancel (None when nothing was aborted and no check ran)."""
    s = Summary.read(s)
    n, c = s.requests_aborted, s.cancel
    if not n and not c:
        return None
    c = c or Cancel()
    out = f"aborted (load.cancel): {n} of {measured_total(s)} (not failures)"
    if c.with_first_token:
        out += f", {c.with_first_token} after their first token"
    if c.server_running_after is not None:
        out += "; server after the run: " + _after(c.server_running_after)
    return out


def retry_line(s: dict | Summary) -> Optional[str]:
    s = Summary.read(s)
    r = s.retries
    if not r or not r.requests:
        return None
    return (f"retried (api.retry): {r.requests} of {measured_total(s)} request(s), "
            f"{r.attempts} attempts, {num(r.wait_s)} s waiting (inside their "
            "TTFT/E2E)")
