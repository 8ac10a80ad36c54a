"""Clients that hang up (load.cancel) and rate limits (api.retry): summary.json's
``requests_aborted``, ``cancel`` and ``retries`` blocks. Pure: records and meta in, dicts out.

    requests_aborted   measured records with status ``aborted`` (the client closed the stream on
                       purpose): neither failed nor cancelled, so the verdict does not count them
    cancel             {requests_aborted, with_first_token, ttft_ms (stats over the aborted
                       requests whose first token came, from the send), output_tokens_received,
                       server_running_after (meta.json ``running_after``: the server's running
                       gauge after the run, through analysis.server.sanity: a NaN / Inf / text
                       value, or an old meta.json's {value: null, leaked: true}, is no verdict),
                       leaked (true: the server kept a slot; None: unknown), leaked_reason (why
                       leaked is not false: no /metrics, no known gauge, a refused value)}; None
                       when the run had no load.cancel and nothing was aborted
    retries            {requests (measured requests sent more than once by api.retry), attempts
                       (attempts of those requests in all), wait_s (Σ over them of each next
                       send − the previous attempt's end: the time spent waiting)}

The headline figures (TTFT, TPOT, ITL, E2E) stay over completed requests only: an aborted
request has no end of its own (its E2E and TPOT are the hang-up's, not the server's), and a
run with load.cancel keeps figures comparable to one without; the TTFT of the aborted requests
that got a first token is ``cancel.ttft_ms``.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.meta import RunMeta
from analysis.contract.summary_blocks import RunningAfter
from analysis.metrics import figures as m
from analysis.server import sanity


def aborted(records: list) -> list:
    """Measured records with ``status == "aborted"``."""
    return m._where(m.measured(records), "status", "aborted", True)


def checked_after(running_after: Optional[dict]) -> Optional[dict]:
    """meta.json's ``running_after`` through the sanity gate: a ``leaked`` verdict stands only
    on a value that is a finite number ≥ 0; else (NaN, Inf, text, or an old meta.json's
    ``{value: null, leaked: true}``) ``leaked`` None and ``value`` None, with the reason."""
    if not isinstance(running_after, (dict, RunningAfter)):
        return None
    typed = RunningAfter.read(running_after)
    after = dict(running_after) if isinstance(running_after, dict) else typed.as_dict()
    if typed.leaked is None:
        return after
    c = sanity.gauge(typed.value, f"the running gauge ({typed.metric})")
    if not c.ok:
        after.update(value=None, leaked=None,
                     reason=f"{c.reason}: whether the server freed the slots is unknown")
    return after


def leak_warning(running_after: Optional[dict]) -> Optional[str]:
    """One warning line when the server's running gauge stayed above 0 after the run."""
    checked = checked_after(running_after)
    after = RunningAfter.read(checked) if checked else None
    if not after or not after.leaked:
        return None
    waited = sanity.number(after.waited_s).value
    return (f"the server still reported {after.value:g} running request(s) "
            f"({after.metric}) {'' if waited is None else f'{waited:g} s '}after the "
            "run ended: it did not free the slots of the requests the client hung up on")


def cancel_block(records: list, meta: dict | RunMeta) -> Optional[dict]:
    ab = aborted(records)
    after = checked_after(RunMeta.read(meta).running_after)
    if not ab and after is None:
        return None
    ttfts = [m.ttft_ms(r) for r in ab]
    got = [x for x in ttfts if x is not None]
    toks = [r.output_tokens or r.chunk_output_tokens or 0 for r in ab]
    typed = RunningAfter.read(after) if after is not None else None
    leaked = typed.leaked if typed is not None else None
    if after is None:
        why = ("no leak check: it runs with load.cancel and target.scrape_metrics on, after a "
               "run that was not interrupted")
    else:
        why = typed.reason if leaked is not False else None
        if leaked is None and not why:
            why = "the leak check gave no verdict and no reason"
    return {"requests_aborted": len(ab), "with_first_token": len(got),
            "ttft_ms": m.stats(got) if got else None,
            "ttft_rule": "first_token_at − sent_at of aborted requests whose first token came",
            "output_tokens_received": int(sum(toks)),
            "server_running_after": after,
            "leaked": leaked, "leaked_reason": why}


def fill(out: dict, records: list, meta: dict) -> None:
    """summary.json's ``requests_aborted``, ``cancel``, ``retries`` (and the leak warning)."""
    out["requests_aborted"] = len(aborted(records))
    out["cancel"] = cancel_block(records, meta)
    out["retries"] = retries_block(records)
    warn = leak_warning(RunMeta.read(meta).running_after)
    if warn:
        out.setdefault("warnings", []).append(warn)


def retries_block(records: list) -> dict:
    recs = m.measured(records)
    n = attempts = 0
    wait_ns = 0
    for log, k in zip(m.field(recs, "attempt_log"), m.field(recs, "attempts")):
        if not k or k < 2:
            continue
        n += 1
        attempts += k
        for prev, nxt in zip(log or (), (log or ())[1:]):
            if prev[2] is not None and nxt[1] is not None and nxt[1] > prev[2]:
                wait_ns += nxt[1] - prev[2]
    return {"requests": n, "attempts": attempts, "wait_s": wait_ns / 1e9}
