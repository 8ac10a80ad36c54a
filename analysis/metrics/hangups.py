"""Clients that hang up (load.cancel) and rate limits (api.retry): summary.json's
``requests_aborted``, ``cancel`` and ``retries`` blocks. Pure: records and meta in, dicts out.

    requests_aborted   measured records with status ``aborted`` (the client closed the stream on
                       purpose): neither failed nor cancelled, so the verdict does not count them
    cancel             {requests_aborted, with_first_token, ttft_ms (stats over the aborted
                       requests whose first token came, from the send), output_tokens_received,
                       server_running_after (meta.json ``running_after``: the server's running
                       gauge after the run), leaked (true: the server kept a slot)}; None when
                       the run had no load.cancel and nothing was aborted
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

from analysis.metrics import figures as m


def aborted(records: list) -> list:
    """Measured records with ``status == "aborted"``."""
    return m._where(m.measured(records), "status", "aborted", True)


def leak_warning(running_after: Optional[dict]) -> Optional[str]:
    """One warning line when the server's running gauge stayed above 0 after the run."""
    if not running_after or not running_after.get("leaked"):
        return None
    return (f"the server still reported {running_after.get('value'):g} running request(s) "
            f"({running_after.get('metric')}) {running_after.get('waited_s'):g} s after the "
            "run ended: it did not free the slots of the requests the client hung up on")


def cancel_block(records: list, meta: dict) -> Optional[dict]:
    ab = aborted(records)
    after = meta.get("running_after")
    if not ab and after is None:
        return None
    ttfts = [m.ttft_ms(r) for r in ab]
    got = [x for x in ttfts if x is not None]
    toks = [r.get("output_tokens") or r.get("chunk_output_tokens") or 0 for r in ab]
    return {"requests_aborted": len(ab), "with_first_token": len(got),
            "ttft_ms": m.stats(got) if got else None,
            "ttft_rule": "first_token_at − sent_at of aborted requests whose first token came",
            "output_tokens_received": int(sum(toks)),
            "server_running_after": after,
            "leaked": after.get("leaked") if isinstance(after, dict) else None}


def fill(out: dict, records: list, meta: dict) -> None:
    """summary.json's ``requests_aborted``, ``cancel``, ``retries`` (and the leak warning)."""
    out["requests_aborted"] = len(aborted(records))
    out["cancel"] = cancel_block(records, meta)
    out["retries"] = retries_block(records)
    warn = leak_warning(meta.get("running_after"))
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
