"""Metric definitions: pure functions of request records (a RecordList, or Records / JSON dicts
read as one by analysis.contract.records.as_records).

Every time in a record is an integer from ``time.perf_counter_ns``; every figure here is in
milliseconds (latencies) or per second (rates). A function returns ``None`` (never 0) when the data
it needs is missing. Only records whose ``phase`` is not ``"warmup"`` are "measured" (see
``measured``); latency figures use completed requests (``status == "ok"``).

Per request (``None`` when a time is missing):
    ttft_ms                = first_token_at − sent_at        (first chunk with n_tokens > 0)
    ttft_from_scheduled_ms = first_token_at − scheduled_at   (MLPerf's choice: a late client shows)
    e2el_ms                = end_at − sent_at ;  e2el_from_scheduled_ms = end_at − scheduled_at
    schedule_lag_ms        = sent_at − scheduled_at
    tpot_ms                = (e2el − ttft) / (output_tokens − 1), only where output_tokens > 1
    itl_ms (list)          = for each token chunk k ≥ 1 after the first: gap_k / n_k, repeated n_k
                             times (token-weighted); gap_k = t_k − t_{k−1} between token chunks
    chunk_gaps_ms (list)   = the raw gaps t_k − t_{k−1} between consecutive token chunks
"""
from __future__ import annotations

from operator import attrgetter
from typing import Iterable, Optional

import numpy as np

from analysis.contract import timing
from analysis.contract.records import RecordIn, RecordList, Records, as_record, as_records, table_of

NS_PER_MS = timing.NS_PER_MS
STAT_KEYS = ("mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max", "count")
_PCTS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


# ---- selection --------------------------------------------------------------------------------
# Open-loop modes: a schedule fixes every send time in advance (server: drawn; trace: the file's),
# so TTFT and E2E are also taken from the scheduled time and the schedule checks apply.
OPEN_LOOP_MODES = ("server", "trace")


def open_loop(mode: Optional[str]) -> bool:
    return mode in OPEN_LOOP_MODES


def field(records, key: str) -> list:
    """Field ``key`` of every record (attribute access at C speed). Of a RecordList asked again:
    the same list (read it, do not change it)."""
    records = as_records(records)
    table = records.table
    if getattr(table, "columnar", False):       # records.arrow: from its column, not kept
        return table.values(key)
    memo = records.memo.get(key)
    if memo is None:
        memo = records.memo[key] = list(map(attrgetter(key), records))
    return memo


def _where(records, key: str, value: str, equal: bool) -> RecordList:
    """The records whose ``key`` equals (``equal``) / differs from ``value``, selected by the
    column arrays of the records' table: a RecordList over the same arrays (the same selection
    asked again: that list; do not append to or reorder it)."""
    records = as_records(records)
    memo = records.memo.get((key, value, equal))
    if memo is not None:
        return memo
    col = records.table.column(key)
    out = records.table.select((col == value) if equal else (col != value)).records
    records.memo[(key, value, equal)] = out
    return out


def measured(records: Records) -> RecordList:
    """Records of the measured phase (``phase`` other than ``"warmup"``)."""
    return _where(records, "phase", "warmup", False)


def completed(records: Records) -> RecordList:
    """Records with ``status == "ok"``."""
    return _where(records, "status", "ok", True)


def failed(records: Records) -> RecordList:
    """Records with ``status == "error"`` (cancelled requests are not failures)."""
    return _where(records, "status", "error", True)


def cancelled(records: Records) -> RecordList:
    """Records with ``status == "cancelled"`` (the run was interrupted before they ended)."""
    return _where(records, "status", "cancelled", True)


# ---- per-request timings: analysis.contract.timing (one definition, also roofline's) --------
_diff_ms, token_chunks = timing.diff_ns_ms, timing.token_chunks
first_token_at = timing.first_token_at
ttft_ms, ttft_from_scheduled_ms = timing.ttft_ms, timing.ttft_from_scheduled_ms
e2el_ms, e2el_from_scheduled_ms = timing.e2el_ms, timing.e2el_from_scheduled_ms
schedule_lag_ms, tpot_ms = timing.schedule_lag_ms, timing.tpot_ms
chunk_gaps_ms, itl_ms = timing.chunk_gaps_ms, timing.itl_ms


# ---- distributions ----------------------------------------------------------------------------
def stats(values: Iterable[Optional[float]]) -> dict:
    """mean, std (population, ddof=0), min, p50, p90, p95, p99, p999 (99.9th), max, count.

    Percentiles: ``numpy.percentile(method="linear")`` (numpy's default, interpolating between
    closest ranks). None entries are dropped; with no data every field except count is None.
    """
    if isinstance(values, np.ndarray):           # a figure's array (NaN: undefined): one copy,
        arr = values[~np.isnan(values)].astype(float, copy=False) if values.dtype.kind == "f" \
            else values.astype(float)            # partitioned in place by the percentiles
    else:
        arr = np.asarray([v for v in values if v is not None], dtype=float)
    out: dict = {k: None for k in STAT_KEYS}
    out["count"] = int(arr.size)
    if arr.size == 0:
        return out
    out.update(mean=float(arr.mean()), std=float(arr.std()), min=float(arr.min()),
               max=float(arr.max()))
    qs = np.percentile(arr, list(_PCTS.values()), method="linear",   # one partition, same values
                       overwrite_input=True)            # (arr is this call's own)
    out.update({key: float(v) for key, v in zip(_PCTS, qs)})
    return out


def percentile(values: Iterable[Optional[float]], q: float) -> Optional[float]:
    """The q-th percentile (numpy, method="linear") of the non-None values, or None."""
    if isinstance(values, np.ndarray):
        arr = values[~np.isnan(values)]
        return float(np.percentile(arr, q, method="linear")) if arr.size else None
    arr = [v for v in values if v is not None]
    return float(np.percentile(np.asarray(arr, dtype=float), q, method="linear")) if arr else None


def pooled(records: Records, per_record) -> list[float]:
    """Concatenate a list-valued per-record metric (``itl_ms``, ``chunk_gaps_ms``) over records."""
    out: list[float] = []
    for r in records:
        out.extend(per_record(r))
    return out


def selections(records) -> tuple:
    """(table, measured, done, sent) over ``records``: analysis.contract.records.table_of and
    the masks of measured records, completed ones (status ok) and sent ones (ok | error)."""
    t = table_of(records)
    masks = t.__dict__.get("_selections")
    if masks is None:                               # the columns do not change: once a table
        phase, status = t.column("phase"), t.column("status")
        meas = phase != "warmup"
        masks = t._selections = (meas, meas & (status == "ok"),
                                 meas & ((status == "ok") | (status == "error")))
        for a in masks:
            a.flags.writeable = False               # shared: a caller copies to change one
    return (t, *masks)


def latency_series(records) -> dict[str, np.ndarray]:
    """The summary's latency distributions as arrays (NaN: undefined for that request): per
    completed measured request, schedule lag per sent one, ITL and chunk gaps pooled."""
    t, _, done, sent = selections(records)
    cached = t.__dict__.get("_latency")
    if cached is not None:                          # the verdict, the plots: the same arrays
        return dict(cached)
    f = timing.per_record(t)
    pick = (lambda a, sel: a if sel.all() else a[sel])      # every record: no copy
    out = {k: pick(f[k], done) for k in ("ttft_ms", "ttft_from_scheduled_ms", "tpot_ms",
                                          "e2el_ms", "e2el_from_scheduled_ms")}
    out["schedule_lag_ms"] = pick(f["schedule_lag_ms"], sent)
    out["itl_ms"], out["chunk_gap_ms"] = timing.pooled_ms(t, done)
    t._latency = out
    return dict(out)


# ---- run-level figures ------------------------------------------------------------------------
WINDOW_RULE = ("first sent_at to last end_at over measured requests that were sent and ended "
               "(completed and failed; warm-up and cancelled excluded)")


def window(records: Records) -> Optional[tuple[int, int]]:
    """(start_ns, end_ns) = (min sent_at, max end_at) over measured, non-cancelled records that
    were sent and ended; None if there are none (or the span is not positive)."""
    tab, _, _, sent = selections(records if isinstance(records, list) else list(records))
    (s, s_ok), (e, e_ok) = tab.stamp("sent_at_ns"), tab.stamp("end_at_ns")
    rs = sent & s_ok & e_ok
    if not rs.any():
        return None
    start, end = int(s[rs].min()), int(e[rs].max())
    return (start, end) if end > start else None


def duration_s(win: Optional[tuple[int, int]]) -> Optional[float]:
    """Window length in seconds."""
    return None if win is None else (win[1] - win[0]) / 1e9


def _per_s(count: Optional[float], win: Optional[tuple[int, int]]) -> Optional[float]:
    d = duration_s(win)
    return None if d is None or count is None else count / d


def request_throughput(records: Records, win) -> Optional[float]:
    """Completed measured requests / window duration (req/s)."""
    return _per_s(len(completed(measured(records))), win)


def _token_sum(recs: Records, key: str) -> Optional[int]:
    vals = field(recs, key)
    return None if not vals or None in vals else int(sum(vals))


def output_throughput(records: Records, win) -> Optional[float]:
    """Σ output_tokens of completed measured requests / window duration (tokens/s).
    None if any completed request lacks an output count."""
    return _per_s(_token_sum(completed(measured(records)), "output_tokens"), win)


def total_token_throughput(records: Records, win) -> Optional[float]:
    """Σ (prompt_tokens + output_tokens) of completed measured requests / window (tokens/s).
    None if any completed request lacks either count."""
    recs = completed(measured(records))
    p, o = _token_sum(recs, "prompt_tokens"), _token_sum(recs, "output_tokens")
    return None if p is None or o is None else _per_s(p + o, win)


def meets_slo(rec: RecordIn, slo: dict, from_scheduled: bool) -> bool:
    """Does one completed request meet every configured per-request limit in ``slo``?

    ttft_ms / e2el_ms: the request's TTFT / E2E (from scheduled when ``from_scheduled``);
    tpot_ms: its TPOT (a request without a TPOT, output_tokens ≤ 1, does NOT pass);
    itl_ms: its largest token-weighted ITL (a request without any ITL value does NOT pass).
    """
    rec = as_record(rec)
    if rec.status != "ok":
        return False
    checks = (
        ("ttft_ms", ttft_from_scheduled_ms(rec) if from_scheduled else ttft_ms(rec)),
        ("e2el_ms", e2el_from_scheduled_ms(rec) if from_scheduled else e2el_ms(rec)),
        ("tpot_ms", tpot_ms(rec)),
        ("itl_ms", max(itl_ms(rec), default=None)),
    )
    for key, value in checks:
        limit = slo.get(key)
        if limit is not None and (value is None or value > limit):
            return False
    return True


def goodput(records: Records, slo: Optional[dict], win, from_scheduled: bool) -> Optional[float]:
    """Measured requests meeting every configured SLO (``meets_slo``) / window duration (req/s).
    None when no per-request limit (ttft/tpot/itl/e2el) is configured."""
    if not slo or all(slo.get(k) is None for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")):
        return None
    return _per_s(int(meets_slo_mask(records, slo, from_scheduled).sum()), win)


def meets_slo_mask(records: list, slo: dict, from_scheduled: bool) -> np.ndarray:
    """meets_slo of every record at once (arrays; the same floats), False for warm-up ones."""
    tab, _, ok, _ = selections(records)
    f = timing.per_record(tab)
    sfx = "_from_scheduled_ms" if from_scheduled else "_ms"
    values = {"ttft_ms": f["ttft" + sfx], "e2el_ms": f["e2el" + sfx], "tpot_ms": f["tpot_ms"]}
    ok = ok.copy()
    for key in ("ttft_ms", "e2el_ms", "tpot_ms", "itl_ms"):
        limit = slo.get(key)
        if limit is not None:
            v = values[key] if key != "itl_ms" else timing.max_itl_ms(tab)
            ok &= ~np.isnan(v) & (v <= limit)       # no value, or above the limit: fails
    return ok


def failures_by_kind(records: Records) -> dict[str, int]:
    """Count of failed (status "error") measured requests per ``error_kind`` ("unknown" if None)."""
    out: dict[str, int] = {}
    for k in field(failed(measured(records)), "error_kind"):
        k = k or "unknown"
        out[k] = out.get(k, 0) + 1
    return dict(sorted(out.items()))


def token_provenance(records: Records) -> dict:
    """Where the token counts of completed measured requests came from, and disagreements."""
    recs = completed(measured(records))

    def tally(key: str) -> dict:
        out: dict[str, int] = {}
        vals = field(recs, key)
        for src in set(vals):                       # few distinct values: counted at C speed
            out[src or "missing"] = out.get(src or "missing", 0) + vals.count(src)
        return dict(sorted(out.items()))
    usage, chunk = field(recs, "usage_output_tokens"), field(recs, "chunk_output_tokens")
    if usage.count(None) or chunk.count(None):      # only the requests with both counts
        pairs = [(u, c) for u, c in zip(usage, chunk) if u is not None and c is not None]
        usage, chunk = [u for u, _ in pairs], [c for _, c in pairs]
    return {"output_tokens_source": tally("output_tokens_source"),
            "prompt_tokens_source": tally("prompt_tokens_source"),
            "with_both_counts": len(usage),
            "mismatch_count": sum(map(bool, field(recs, "token_count_mismatch"))),
            "usage_output_tokens_total": int(sum(usage)) if usage else None,
            "chunk_output_tokens_total": int(sum(chunk)) if chunk else None}


def token_reads(records: list) -> int:
    """Σ over ``records`` of the distinct stamps of their token-carrying chunks (the reads that
    carried a token chunk; analysis.contract.timing.token_reads, on arrays)."""
    return timing.token_reads(table_of(records))


def rate_of(times_ns: Iterable[Optional[int]]) -> Optional[float]:
    """(n − 1) / (last − first) in events/s over the non-None times; None if n < 2 or span 0."""
    ts = sorted(t for t in times_ns if t is not None)
    if len(ts) < 2 or ts[-1] == ts[0]:
        return None
    return (len(ts) - 1) / ((ts[-1] - ts[0]) / 1e9)


def lag_growth_ms(records: Records) -> Optional[float]:
    """median(schedule lag of the last third of sends) − median(first third), ordered by
    scheduled_at; None with fewer than 6 lags. Positive: the client fell behind as it ran."""
    tab, meas, _, _ = selections(records)
    sched, lag = tab.stamp("scheduled_at_ns")[0], timing.per_record(tab)["schedule_lag_ms"]
    keep = meas & ~np.isnan(lag)
    if keep.sum() < 6:
        return None
    sched, lag = sched[keep], lag[keep]
    lag = lag[np.lexsort((lag, sched))]             # ordered by scheduled_at (then lag)
    third = lag.size // 3
    return float(np.median(lag[-third:]) - np.median(lag[:third]))


def in_flight(records: Records) -> list[tuple[int, int]]:
    """Step function of requests in flight: [(t_ns, count after t)], from sent_at/end_at."""
    t, n = in_flight_steps(records)
    return list(zip(t.tolist(), n.tolist()))


def in_flight_steps(records: Records, sel: Optional[np.ndarray] = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """in_flight as two int64 arrays (t_ns, count after t); ``sel``: a mask over the records'
    table (analysis.contract.records.table_of), only those records. Cached on the table for
    ``sel`` None (steady_window and the time series read the same steps)."""
    tab = table_of(records if isinstance(records, list) else list(records))
    if sel is not None and sel.all():               # every record: the cached steps
        sel = None
    if sel is None and "_in_flight" in tab.__dict__:
        return tab._in_flight
    (s, s_ok), (e, e_ok) = tab.stamp("sent_at_ns"), tab.stamp("end_at_ns")
    both = s_ok & e_ok
    if sel is not None:
        both = both & sel
    out = _steps(s[both], e[both])
    if sel is None:
        for a in out:
            a.flags.writeable = False               # shared by its readers
        tab._in_flight = out
    return out


def _steps(sends: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t_ns, count after t) of the sends (+1) and ends (−1), by time, ends first at equal
    times. Sorted as one int64 key, 2·t + (1 for a send): the same order as a lexsort of
    (t, ±1), in a third of its memory."""
    lim = 1 << 61
    if sends.size and (min(sends.min(), ends.min()) < -lim or max(sends.max(), ends.max()) >= lim):
        t = np.concatenate([sends, ends])       # (stamps too large to double: lexsort)
        d = np.concatenate([np.ones(sends.size, np.int64), -np.ones(ends.size, np.int64)])
        order = np.lexsort((d, t))
        return t[order], np.cumsum(d[order])
    key = np.concatenate([sends, ends])
    key <<= 1
    key[:sends.size] |= 1
    key.sort()
    count = np.cumsum((key & 1).astype(np.int8) * 2 - 1, dtype=np.int64)
    key >>= 1
    return key, count


def stamp_rate(records, name: str) -> Optional[float]:
    """rate_of the ``name`` stamps (``*_at_ns``) of the measured records, on the table's arrays:
    (n − 1) / (last − first) in events/s; None if n < 2 or span 0."""
    tab, meas, _, _ = selections(records)
    v, ok = tab.stamp(name)
    v = v[meas & ok]
    if v.size < 2:
        return None
    lo, hi = int(v.min()), int(v.max())
    return None if hi == lo else (v.size - 1) / ((hi - lo) / 1e9)
