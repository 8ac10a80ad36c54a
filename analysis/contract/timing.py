"""The timing figures' definitions, once: per record, and the same on a RecordTable's arrays.

    a record (Record, or its JSON dict) ─► token_chunks, first_token_at, itl_ms, chunk_gaps_ms
    RecordTable + a selection of records ─► the same figures as arrays, in record order
        (per_record: ttft, tpot, e2el, ...; pooled: itl_ms, chunk_gap_ms)
Both analysis.metrics (summary, verdict) and analysis.roofline (by_concurrency) import these, so
each figure has one definition; the array forms give exactly the floats of the per-record ones
(the same operations in the same order).

    token chunk = a chunk [t_ns, n] with n > 0; gap_k = t_k − t_{k−1} between consecutive ones
    ttft_ms     = first_token_at − sent_at  (first_token_at_ns, else the first token chunk)
    itl_ms      = gap_k / n_k, repeated n_k times (token-weighted), for each token chunk k ≥ 1
    chunk_gap   = the raw gap_k (ms)
    tpot_ms     = (e2el − ttft) / (output_tokens − 1), only where output_tokens > 1
May import: numpy, analysis.contract.record(s). Nothing else of analysis.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract.records import RecordIn, as_record

NS_PER_MS = 1e6


# ---- per record --------------------------------------------------------------------------------
def token_chunks(rec: RecordIn) -> list[tuple[int, int]]:
    """The chunks that carry output tokens: [(arrival_ns, n_tokens)] with n_tokens > 0."""
    return [(int(t), int(n)) for t, n in (as_record(rec).chunks or ()) if n and n > 0]


def first_token_at(rec: RecordIn) -> Optional[int]:
    """``first_token_at_ns``, else the arrival of the first chunk with n_tokens > 0, else None."""
    rec = as_record(rec)
    if rec.first_token_at_ns is not None:
        return rec.first_token_at_ns
    tc = token_chunks(rec)
    return tc[0][0] if tc else None


def diff_ns_ms(a: Optional[int], b: Optional[int]) -> Optional[float]:
    """(a − b) in ms, or None if either is missing."""
    if a is None or b is None:
        return None
    return (a - b) / NS_PER_MS


def ttft_ms(rec: RecordIn) -> Optional[float]:
    """TTFT from send = first_token_at − sent_at (ms)."""
    rec = as_record(rec)
    return diff_ns_ms(first_token_at(rec), rec.sent_at_ns)


def ttft_from_scheduled_ms(rec: RecordIn) -> Optional[float]:
    """TTFT from the schedule = first_token_at − scheduled_at (ms)."""
    rec = as_record(rec)
    return diff_ns_ms(first_token_at(rec), rec.scheduled_at_ns)


def e2el_ms(rec: RecordIn) -> Optional[float]:
    """End-to-end latency from send = end_at − sent_at (ms)."""
    rec = as_record(rec)
    return diff_ns_ms(rec.end_at_ns, rec.sent_at_ns)


def e2el_from_scheduled_ms(rec: RecordIn) -> Optional[float]:
    """End-to-end latency from the schedule = end_at − scheduled_at (ms)."""
    rec = as_record(rec)
    return diff_ns_ms(rec.end_at_ns, rec.scheduled_at_ns)


def schedule_lag_ms(rec: RecordIn) -> Optional[float]:
    """How late the client sent = sent_at − scheduled_at (ms)."""
    rec = as_record(rec)
    return diff_ns_ms(rec.sent_at_ns, rec.scheduled_at_ns)


def tpot_ms(rec: RecordIn) -> Optional[float]:
    """TPOT = (E2E − TTFT) / (output_tokens − 1) (ms); None unless output_tokens > 1."""
    rec = as_record(rec)
    n = rec.output_tokens
    e2e, ttft = e2el_ms(rec), ttft_ms(rec)
    if n is None or n <= 1 or e2e is None or ttft is None:
        return None
    return (e2e - ttft) / (n - 1)


def chunk_gaps_ms(rec: RecordIn) -> list[float]:
    """Raw gaps between consecutive token chunks (ms), one per chunk after the first."""
    rec = as_record(rec)
    tc = token_chunks(rec)
    return [(tc[k][0] - tc[k - 1][0]) / NS_PER_MS for k in range(1, len(tc))]


def itl_of_gap_ms(gap_ns: int, n: int) -> float:
    """One token chunk's ITL: its gap (ns) to the previous token chunk / its n tokens, in ms."""
    return gap_ns / NS_PER_MS / n


def itl_ms(rec) -> list[float]:
    """Token-weighted ITL (ms): gap_k / n_k repeated n_k times for each token chunk k ≥ 1."""
    tc = token_chunks(rec)
    out: list[float] = []
    for k in range(1, len(tc)):
        n = tc[k][1]
        out.extend([itl_of_gap_ms(tc[k][0] - tc[k - 1][0], n)] * n)
    return out


# ---- on a table's arrays -----------------------------------------------------------------------
BLOCK = 1 << 20     # chunks looked at a time (token_reads)


def token_gaps(table, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gap_ns, n_tokens of the later chunk, record index) of every pair of consecutive token
    chunks of the selected records, in record then chunk order."""
    owner = table.record_of_chunk()
    keep = table.n > 0
    keep &= sel[owner]
    o = owner[keep]
    same = o[1:] == o[:-1]
    o = o[1:][same]
    t = table.t[keep]
    gap = np.diff(t)[same]
    del t
    return gap, table.n[keep][1:][same], o


def pooled_ms(table, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(itl_ms, chunk gaps in ms) of the selected records, each concatenated in record order."""
    gap, n, _ = token_gaps(table, sel)
    gap_ms = gap.astype(float) / NS_PER_MS
    if n.size and n.min() == 1 == n.max():      # a token a chunk: the same floats (x / 1 == x),
        gap_ms.flags.writeable = False           # one array for both (read-only: shared)
        return gap_ms, gap_ms
    return np.repeat(gap_ms / n, n), gap_ms


def pooled_itl_ms(table, sel: np.ndarray) -> np.ndarray:
    """itl_ms of the selected records, concatenated (the per-record definition's floats)."""
    gap, n, _ = token_gaps(table, sel)
    return np.repeat(gap.astype(float) / NS_PER_MS / n, n)


def pooled_chunk_gaps_ms(table, sel: np.ndarray) -> np.ndarray:
    gap, _, _ = token_gaps(table, sel)
    return gap.astype(float) / NS_PER_MS


def max_itl_ms(table) -> np.ndarray:
    """Each record's largest itl_ms (NaN: none), for the per-request SLO check."""
    gap, n, o = token_gaps(table, np.ones(len(table), bool))
    out = np.full(len(table), np.nan)
    if gap.size:
        np.fmax.at(out, o, gap.astype(float) / NS_PER_MS / n)
    return out


def first_token_ns(table) -> tuple[np.ndarray, np.ndarray]:
    """first_token_at per record as (int64, present): the field, else the first token chunk."""
    ft, ok = table.stamp("first_token_at_ns")
    missing = ~ok
    if missing.any():
        owner = table.record_of_chunk()
        tok = np.flatnonzero(table.n > 0)
        first = np.full(len(table), -1, np.int64)
        rev = tok[::-1]                                  # the earliest token chunk wins
        first[owner[rev]] = rev
        fill = missing & (first >= 0)
        ft = ft.copy()
        ft[fill] = table.t[first[fill]]
        ok = ok | fill
    return ft, ok


def diff_ms(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """(a − b) / 1e6 per record, NaN where either stamp is missing."""
    out = (a[0] - b[0]).astype(float) / NS_PER_MS
    out[~(a[1] & b[1])] = np.nan
    return out


def tokens_in(table, start: int, end: int) -> int:
    """Output tokens that arrived in (start, end]: every token chunk's n at its arrival; a
    record without token chunks (not streamed) counts its output_tokens at its end_at
    (analysis.energy.split.token_events' events, on arrays)."""
    tok = table.n > 0
    total = int(table.n[tok & (table.t > start) & (table.t <= end)].sum())
    streamed = np.zeros(len(table), bool)
    streamed[table.record_of_chunk()[tok]] = True
    out = table.column("output_tokens", float)
    end_ns, ok = table.stamp("end_at_ns")
    whole = ~streamed & ok & ~np.isnan(out) & (out != 0) & (end_ns > start) & (end_ns <= end)
    return total + int(sum(int(v) for v in out[whole]))


def token_reads(table) -> int:
    """Distinct arrival stamps among each record's chunks with n_tokens != 0, summed over the
    table's records (the reads that carried a token chunk: one read, one stamp); a block of
    chunks at a time, the last pair carried across blocks."""
    parent = getattr(table, "parent", None)
    sel = None
    if parent is not None:                          # a selection: counted on the parent's arrays
        sel, table = table.mask(), parent
    owner = table.record_of_chunk()
    total, carry = 0, None
    for lo in range(0, len(table.t), BLOCK):
        keep = table.n[lo:lo + BLOCK] != 0
        o = owner[lo:lo + BLOCK]
        if sel is not None:
            keep &= sel[o]
        o, t = o[keep], table.t[lo:lo + BLOCK][keep]
        if not t.size:
            continue
        if carry is not None:                       # the pair across the blocks' edge
            o, t = np.concatenate([carry[0], o]), np.concatenate([carry[1], t])
        else:
            total += 1                              # the first read
        same = o[1:] == o[:-1]
        if (t[1:][same] < t[:-1][same]).any():      # a record's stamps out of order: sort all
            return _sorted_reads(table, sel)
        total += int(np.count_nonzero(~same | (t[1:] != t[:-1])))
        carry = o[-1:], t[-1:]
    return total


def _sorted_reads(table, sel) -> int:
    keep = table.n != 0
    if sel is not None:
        keep &= sel[table.record_of_chunk()]
    owner, t = table.record_of_chunk()[keep], table.t[keep]
    order = np.lexsort((t, owner))
    owner, t = owner[order], t[order]
    same = owner[1:] == owner[:-1]
    return int(1 + np.count_nonzero(~same | (t[1:] != t[:-1])))


def per_record(table) -> dict[str, np.ndarray]:
    """Every per-record figure of every record (NaN: undefined), cached on the table."""
    cached = getattr(table, "_figures", None)
    if cached is not None:
        return cached
    parent = getattr(table, "parent", None)
    if parent is not None:                          # a selection: the parent's, gathered
        table._figures = {k: v[table.idx] for k, v in per_record(parent).items()}
        return table._figures
    sent, sched = table.stamp("sent_at_ns"), table.stamp("scheduled_at_ns")
    end, ft = table.stamp("end_at_ns"), first_token_ns(table)
    ttft, e2el = diff_ms(ft, sent), diff_ms(end, sent)
    out_tok = table.column("output_tokens", float)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out_tok > 1, (e2el - ttft) / (out_tok - 1), np.nan)
    figs = {"ttft_ms": ttft, "ttft_from_scheduled_ms": diff_ms(ft, sched),
            "e2el_ms": e2el, "e2el_from_scheduled_ms": diff_ms(end, sched),
            "schedule_lag_ms": diff_ms(sent, sched), "tpot_ms": tpot}
    table._figures = figs
    return figs
