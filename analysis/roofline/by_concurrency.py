"""The decode step by requests in flight: each inter-token gap against the floor at its own batch.

    records ─► spans (every record with sent_at and end_at, any status, warm-up too: load is load)
            ─► gaps (measured ok requests: consecutive token chunks, their tokens, context)
            ─► level_of: k when exactly k requests were in flight over the WHOLE gap, else dropped
    per level k: ITL p50 vs the decode-step floor at batch min(k, slots) and the gaps' mean
            context ─► rows ─► summary.json "roofline" "by_in_flight", "batch1" (run_roofline)

Definitions: token chunk, gap_k and ITL (gap_k / n_k, repeated n_k times) are
analysis.contract.timing's, the ones analysis.metrics uses; p50 = numpy's linear median;
    in flight(t) = #records with sent_at ≤ t ≤ end_at (closed: a request is in flight at its own
                   send and end instants)
    context      = prompt_tokens + output tokens received before chunk k (the positions the step
                   that made chunk k attends); the level's context is the mean over its gaps
A gap [t_{k−1}, t_k] is at level k when no request starts in (t_{k−1}, t_k] and none ends in
[t_{k−1}, t_k); otherwise it straddles a change and is dropped (counted). At level 1 nothing else
was in flight: no other prompt being prefilled, no other stream decoded, so level 1 is the batch-1
decode step measured through HTTP. MBU = step bytes / ITL p50 / bandwidth; a level needs
MIN_GAPS gaps for one; a floor above the ITL p50 is a broken floor (MBU None, never above 1).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract import timing
from analysis.roofline import model_cost, bounds
from analysis.contract.records import Records, as_records

MIN_GAPS = 20
BROKEN = "measured below the floor: the spec is wrong or the boundary differs"
NO_BATCH1 = "no inter-token gap had exactly one request in flight"
RULE = ("each inter-token gap of a completed request at the number of requests in flight "
        "(sent ≤ t ≤ end, any status) over the whole gap, gaps that straddle a change dropped; "
        "per level: token-weighted ITL p50 vs the decode-step floor at that batch (capped at the "
        f"server's slots) and the gaps' mean context; MBU from {MIN_GAPS} gaps up")


def spans(records: Records) -> tuple[np.ndarray, np.ndarray]:
    """(sorted send times, sorted end times) of every record that has both stamps."""
    records = as_records(records)
    both = [(r.sent_at_ns, r.end_at_ns) for r in records
            if r.sent_at_ns is not None and r.end_at_ns is not None]
    return (np.sort(np.array([s for s, _ in both], dtype=np.int64)),
            np.sort(np.array([e for _, e in both], dtype=np.int64)))


def gaps(records: Records) -> list[tuple[int, int, int, Optional[int]]]:
    """(start_ns, end_ns, n_tokens, context) of every inter-token gap of every measured ok
    request; context None when the prompt's token count is missing."""
    records = as_records(records)
    out = []
    for r in records:
        if r.phase == "warmup" or r.status != "ok":
            continue
        tc = timing.token_chunks(r)
        p, seen = r.prompt_tokens, tc[0][1] if tc else 0
        for (a, _), (b, n) in zip(tc, tc[1:]):
            out.append((a, b, n, None if p is None else p + seen))
            seen += n
    return out


def level_of(starts: np.ndarray, ends: np.ndarray, a, b) -> np.ndarray:
    """Requests in flight over each whole gap [a, b] (arrays), or -1 where the count changes
    inside it (a start in (a, b] or an end in [a, b))."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    started_in = np.searchsorted(starts, b, "right") - np.searchsorted(starts, a, "right")
    ended_in = np.searchsorted(ends, b, "left") - np.searchsorted(ends, a, "left")
    at_a = np.searchsorted(starts, a, "right") - np.searchsorted(ends, a, "left")
    return np.where((started_in == 0) & (ended_in == 0), at_a, -1)


def _itl_p50_ms(rows) -> float:
    per_token = np.repeat([timing.itl_of_gap_ms(b - a, n) for a, b, n, _ in rows],
                          [n for *_, n, _ in rows])
    return float(np.median(per_token))


def level_row(k: int, rows: list, shape: dict, spec, slots: Optional[int]) -> dict:
    """One level's figures: ITL p50 (measured) vs the floor at batch min(k, slots) (calculated)."""
    dtype = shape.get("dtype", "bf16")
    batch = min(k, slots) if isinstance(slots, int) and slots > 0 else k
    ctxs = [c for *_, c in rows if c is not None]
    ctx = float(np.mean(ctxs)) if ctxs else None
    itl = _itl_p50_ms(rows)
    out = {"in_flight": k, "batch": batch, "gaps": len(rows), "tokens": sum(n for *_, n, _ in rows),
           "itl_p50_ms": itl, "context_len": ctx, "floor_ms": None, "memory_floor_ms": None,
           "compute_floor_ms": None, "binding": None, "step_bytes": None,
           "achieved_bandwidth": None, "mbu": None, "floor_over_measured": None,
           "broken": False, "reason": None}
    if ctx is None:
        out["reason"] = "no prompt token counts: the context is unknown"
        return out
    c = max(1, round(ctx))
    step = bounds.bound(model_cost.decode_step_flops(shape, batch, c),
                          model_cost.decode_step_bytes(shape, batch, c), spec, dtype)
    ms = lambda s: None if s is None else s * 1e3  # noqa: E731
    floor = ms(step.time_s)
    out.update(floor_ms=floor, memory_floor_ms=ms(step.memory_s),
               compute_floor_ms=ms(step.compute_s), binding=step.binding, step_bytes=step.bytes,
               floor_over_measured=bounds.fraction_of_bound(floor, itl))
    achieved = step.bytes / (itl / 1e3) if itl > 0 else None
    mbu = bounds.mbu(achieved, step.bandwidth)
    if len(rows) < MIN_GAPS:      # too few to judge a floor either way (a coalesced read: 0 ms)
        out["reason"] = f"only {len(rows)} gap(s) at this level (an MBU needs {MIN_GAPS})"
    elif (floor is not None and floor > itl) or (mbu is not None and mbu > 1):
        out.update(broken=True, reason=f"ITL p50 {itl:.4g} ms is below its decode floor "
                                       f"{_g(floor)} ms: " + BROKEN)
    elif mbu is None:
        out["reason"] = "the device spec has no memory bandwidth"
    else:
        out.update(achieved_bandwidth=achieved, mbu=mbu)
    return out


def _g(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def by_in_flight(records: Records, shape: dict, spec, slots: Optional[int] = None) -> dict:
    """{"by_in_flight": rows by level (ascending), "by_in_flight_dropped": gaps that straddled a
    change, "by_in_flight_rule", "batch1": level 1's figures or None with the reason}."""
    g = gaps(records)
    levels: dict[int, list] = {}
    dropped = 0
    if g:
        starts, ends = spans(records)
        ks = level_of(starts, ends, [x[0] for x in g], [x[1] for x in g])
        for k, row in zip(ks.tolist(), g):
            if k < 1:       # straddles a change (or, with broken stamps, nothing in flight)
                dropped += 1
            else:
                levels.setdefault(k, []).append(row)
    rows = [level_row(k, levels[k], shape, spec, slots) for k in sorted(levels)]
    return {"by_in_flight": rows, "by_in_flight_dropped": dropped, "by_in_flight_rule": RULE,
            "batch1": batch1(rows, bool(g))}


def batch1(rows: list[dict], any_gap: bool = True) -> dict:
    """{mbu, itl_p50_ms, floor_ms, gaps, context_len, reason}: reason set exactly when mbu is
    None."""
    one = next((r for r in rows if r["in_flight"] == 1), None)
    if one is None:
        reason = NO_BATCH1 if any_gap else "no inter-token gap: no completed request streamed " \
                                           "two token chunks"
        return {"mbu": None, "itl_p50_ms": None, "floor_ms": None, "gaps": 0,
                "context_len": None, "reason": reason}
    out = {k: one[k] for k in ("mbu", "itl_p50_ms", "floor_ms", "gaps", "context_len")}
    out["reason"] = None if one["mbu"] is not None else (one["reason"] or "MBU unknown")
    return out
