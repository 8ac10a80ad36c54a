"""The headline figures of two runs (or two repeat series): change, 95 % interval, verdict.

    records + meta of run A, of run B ─► compare_runs()    per-request figures: bootstrap over
                                                             requests; rates: over time buckets
    summaries of run-1..N of A, of B  ─► compare_repeats() Welch's t on the run figures
        ─► {"figures": {name: {"a", "b", "change_pct", "ci_pct": [lo, hi], "significant",
                               "worse", "higher_is_worse", "unit", "method", "n", "reason"}}}
    figures + PCT ─► regressions()  names whose whole 95 % interval lies beyond PCT % (worse)

Per-request figures (TTFT p50/p99, TTFT from scheduled p99, TPOT p50/p99, ITL p99, E2E p50) are
the summary's own definitions over completed measured requests (analysis.metrics.figures).
Throughputs and goodput are one number per run: their interval comes from ``BUCKETS`` equal time
buckets of the run's window (each bucket's rate; their mean is the summary's figure), resampled
as independent, which they only roughly are. Within-run intervals see the sampling noise of
requests, not run-to-run drift (server state, host load): repeat series (``--repeat N``) see it.
A missing figure gives None and the reason, never 0. analysis.metrics.significance does the
statistics (and the tail rule: p99 needs 1,000 values for an interval).

Each figure says how its interval was found: ``basis`` "within run" (bootstrap over requests or
time buckets of one run each) or "between repeats" (Welch's t over --repeat series' run figures,
the documented way to gate: only it sees run-to-run drift), ``method`` the details.
The gate (``regressions``) does not cry wolf: a figure fails only when its whole interval lies
beyond PCT % in the worse direction (lower bound > +PCT % for latencies, upper bound < −PCT % for
throughput and goodput); a figure without an interval never fails it.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract.meta import RunMeta
from analysis.metrics import figures as m
from analysis.metrics import significance as sig
from analysis.metrics import slo as slo_mod
from analysis.metrics.repeats import HEADLINES, _get
from analysis.contract.records import Records

BUCKETS = 10
# name ─► (kind, per-request metric or rate, percentile, higher is worse, unit)
FIGURES = {
    "ttft_ms_p50": ("request", m.ttft_ms, 50, True, "ms"),
    "ttft_ms_p99": ("request", m.ttft_ms, 99, True, "ms"),
    "ttft_from_scheduled_ms_p99": ("request", m.ttft_from_scheduled_ms, 99, True, "ms"),
    "tpot_ms_p50": ("request", m.tpot_ms, 50, True, "ms"),
    "tpot_ms_p99": ("request", m.tpot_ms, 99, True, "ms"),
    "itl_ms_p99": ("pooled", m.itl_ms, 99, True, "ms"),
    "e2el_ms_p50": ("request", m.e2el_ms, 50, True, "ms"),
    "output_throughput": ("rate", "output_tokens", None, False, "tok/s"),
    "goodput": ("rate", "goodput", None, False, "req/s"),
    "request_throughput": ("rate", "requests", None, False, "req/s"),
}
LABELS = {"ttft_ms_p50": "TTFT p50 (ms)", "ttft_ms_p99": "TTFT p99 (ms)",
          "ttft_from_scheduled_ms_p99": "TTFT from scheduled p99 (ms)",
          "tpot_ms_p50": "TPOT p50 (ms)", "tpot_ms_p99": "TPOT p99 (ms)",
          "itl_ms_p99": "ITL p99 (ms)", "e2el_ms_p50": "E2E p50 (ms)",
          "output_throughput": "output throughput (tok/s)", "goodput": "goodput (req/s)",
          "request_throughput": "request throughput (req/s)"}


def _per_request(done: Records, fn, pooled: bool) -> tuple[list, list]:
    vals, owners = [], []
    for i, r in enumerate(done):
        got = fn(r) if pooled else [fn(r)]
        got = [v for v in got if v is not None]
        vals += got
        owners += [i] * len(got)
    return vals, owners


def _events(records: Records, meta: dict, what: str) -> Optional[list[tuple[int, float]]]:
    """[(t_ns, amount)] whose sum over the window is the summary's count for the rate ``what``;
    None where the summary's figure is None."""
    recs = m.measured(records)
    done = m.completed(recs)
    if what == "requests":
        return [(r.end_at_ns, 1.0) for r in done]
    if what == "goodput":        # None where the summary's is (no limit, or not streamed)
        mm = RunMeta.read(meta)
        slo, _ = slo_mod.resolve_slo_lenient(mm.slo)
        server = m.open_loop(mm.mode)
        if slo_mod.goodput_fields(records, slo, meta, m.window(records), server)["goodput"] is None:
            return None
        return [(r.end_at_ns, 1.0) for r in recs if m.meets_slo(r, slo, server)]
    out = []                    # output tokens: spread over the chunks that carried them
    for r in done:
        n = r.output_tokens
        if n is None:
            return None
        tc = m.token_chunks(r)
        got = sum(k for _, k in tc)
        out += [(t, n * k / got) for t, k in tc] if got else [(r.end_at_ns, float(n))]
    return out


def bucket_rates(records: Records, meta: dict, what: str) -> tuple[Optional[float], list]:
    """(the run's rate, the rate in each of BUCKETS equal slices of its window); the list is
    empty when the run has fewer than MIN_N completed requests, the rate None without data."""
    win = m.window(records)
    ev = _events(records, meta, what)
    if win is None or ev is None:
        return None, []
    width_s = (win[1] - win[0]) / 1e9
    total = sum(a for _, a in ev)
    if len(m.completed(m.measured(records))) < sig.MIN_N:
        return total / width_s, []
    edges = np.linspace(win[0], win[1], BUCKETS + 1)
    idx = np.clip(np.searchsorted(edges, [t for t, _ in ev], side="right") - 1, 0, BUCKETS - 1)
    sums = np.bincount(idx, weights=[a for _, a in ev], minlength=BUCKETS)
    return total / width_s, list(sums / (width_s / BUCKETS))


def _entry(name: str, res: dict) -> dict:
    _, _, _, higher_worse, unit = FIGURES[name]
    a, b, ci = res["a"], res["b"], res["diff_ci"]
    base = a is not None and b is not None and a > 0
    change = 100 * (b - a) / a if base else None
    worse = None
    if res["significant"] is not None and a is not None and b is not None:
        worse = bool(res["significant"] and ((b > a) if higher_worse else (b < a)))
    method = res["method"]
    return {"a": a, "b": b, "change_pct": change,
            "ci_pct": [100 * ci[0] / a, 100 * ci[1] / a] if base and ci else None,
            "ci": ci, "significant": res["significant"], "worse": worse,
            "higher_is_worse": higher_worse, "unit": unit, "method": method,
            "basis": None if not method else (
                "between repeats" if method.startswith("Welch") else "within run"),
            "n": res["n"], "reason": res["reason"],
            **({"p_value": res["p_value"]} if "p_value" in res else {})}


def compare_runs(rec_a: list[dict], meta_a: dict, rec_b: list[dict], meta_b: dict,
                 seed: int = sig.SEED) -> dict:
    """Each headline figure of run B against run A (see the module docstring)."""
    done_a, done_b = m.completed(m.measured(rec_a)), m.completed(m.measured(rec_b))
    out = {}
    for name, (kind, fn, q, _, _) in FIGURES.items():
        if kind == "rate":
            a, ra = bucket_rates(rec_a, meta_a or {}, fn)
            b, rb = bucket_rates(rec_b, meta_b or {}, fn)
            if ra and rb:
                res = sig.mean_diff(ra, rb, seed=seed)
                res.update(a=a, b=b)          # the summary's figure (= the bucket mean)
            else:
                why = "no data" if a is None or b is None else (
                    f"single run with fewer than {sig.MIN_N} completed requests")
                res = {"a": a, "b": b, "diff_ci": None, "significant": None,
                       "method": "time buckets", "n": [len(ra), len(rb)], "reason": why}
        else:
            va, oa = _per_request(done_a, fn, kind == "pooled")
            vb, ob = _per_request(done_b, fn, kind == "pooled")
            res = sig.quantile_diff(va, oa, len(done_a), vb, ob, len(done_b), q, seed=seed)
        out[name] = _entry(name, res)
    return {"figures": out}


def compare_repeats(summaries_a: list[dict], summaries_b: list[dict]) -> dict:
    """Each headline figure: Welch's t on the per-run figures (summary.json) of two series."""
    def runs(summaries: list[dict], name: str) -> list:
        return [_get(s, HEADLINES[name]) for s in summaries]
    return {"figures": {name: _entry(name, sig.welch(runs(summaries_a, name),
                                                     runs(summaries_b, name)))
                        for name in FIGURES}}


def unavailable(reason: str, n=(0, 0)) -> dict:
    """{"figures": ...} with every figure None and ``reason`` (nothing to test)."""
    res = {"a": None, "b": None, "diff_ci": None, "significant": None, "method": None,
           "n": list(n), "reason": reason}
    return {"figures": {name: _entry(name, res) for name in FIGURES}}


def beyond(f: dict, pct: float) -> bool:
    """Does the whole 95 % interval of the change lie beyond ``pct`` % in the worse direction?"""
    ci = f.get("ci_pct")
    if not f.get("worse") or not ci:
        return False
    return ci[0] > pct if f["higher_is_worse"] else ci[1] < -pct


def regressions(figures: dict, pct: float) -> list[str]:
    """Figures whose whole 95 % interval lies beyond ``pct`` % worse (direction-aware)."""
    return [name for name, f in figures.items() if beyond(f, pct)]


def verdict(f: dict) -> str:
    """'significant (worse)' | 'significant (better)' | 'within noise' | 'no interval: why'."""
    if f["significant"] is None:
        return f"no interval: {f['reason']}" if f.get("reason") else "no interval"
    if not f["significant"]:
        return "within noise"
    return "significant (worse)" if f["worse"] else "significant (better)"
