"""Server-side figures from server_metrics.jsonl, beside the client's, over the measured window.

    run_dir/server_metrics.jsonl ─► read_rows ─► Series (per sample name: rows in time order)
    meta.json t0_ns / end_ns (else the "loadgen:mark" rows) ─► window edges = the last good scrape
        at or before t0 and the first at or after the end (the scraper takes one at each mark)
    histograms  Δ_sum / Δ_count between the edges ─► mean server TTFT, queue, prefill, decode, E2E
    gauges      every scrape inside the window    ─► max running / waiting, mean / max KV-cache use
    counters    Δ between the edges               ─► prefix-cache hit rate (Δhits / Δqueries), tokens
    records.jsonl (measured, ok) ─► client TTFT mean ─► decomposition:
        client TTFT = (client TTFT − server TTFT)        network, HTTP, client; evidence calculated
                    + server queue + server prefill       measured by the server
                    + (server TTFT − queue − prefill)     the server's other time (tokenize, IPC, ...)

Metric names are vLLM's (vllm/v1/metrics/loggers.py); the JAX server exposes the same. A value is
a sample's last row at or before t (the scraper writes counters only when they change). Every
figure carries its evidence; a missing one is ``None`` with the reason, never 0.
"""
from __future__ import annotations

import bisect
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional

FILE = "server_metrics.jsonl"
SCRAPE, MARK = "loadgen:scrape", "loadgen:mark"
HISTOGRAMS = {  # figure ─► vLLM histogram (seconds); alternatives: older names
    "server_ttft": ("vllm:time_to_first_token_seconds",),
    "server_queue": ("vllm:request_queue_time_seconds",),
    "server_prefill": ("vllm:request_prefill_time_seconds",),
    "server_decode": ("vllm:request_decode_time_seconds",),
    "server_e2e": ("vllm:e2e_request_latency_seconds",),
    "server_itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
}
QUANTILES = {"server_ttft_p50": ("server_ttft", 0.50), "server_ttft_p99": ("server_ttft", 0.99),
             "server_queue_p99": ("server_queue", 0.99)}
RUNNING, WAITING = ("vllm:num_requests_running",), ("vllm:num_requests_waiting",)
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # new name, pre-0.9 name
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
PROMPT_TOKENS, GEN_TOKENS = ("vllm:prompt_tokens_total",), ("vllm:generation_tokens_total",)


def _read_jsonl(path: str | Path) -> list[dict]:
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:    # a torn last line
                    continue
                if isinstance(row, dict):
                    out.append(row)
    except OSError:
        return []
    return out


def read_rows(path: str | Path) -> list[dict]:
    """server_metrics.jsonl ─► rows; a torn last line is skipped; no file ─► []."""
    return [r for r in _read_jsonl(path) if "t_ns" in r and "name" in r]


class Series:
    """Rows indexed by sample name; values summed over label sets (engines, model names)."""

    def __init__(self, rows: list[dict]):
        self.by_name: dict[str, dict[tuple, list[tuple[int, float]]]] = defaultdict(dict)
        self.scrapes: list[int] = []
        self.marks: dict[str, int] = {}
        for r in sorted(rows, key=lambda r: r["t_ns"]):
            name, labels = r["name"], r.get("labels") or {}
            if name == SCRAPE:
                if labels.get("status") == "ok":
                    self.scrapes.append(int(r["t_ns"]))
            elif name == MARK:
                self.marks.setdefault(labels.get("mark"), int(r["t_ns"]))
            else:                                   # histogram buckets keep their "le"
                key = tuple(sorted(labels.items()))
                self.by_name[name].setdefault(key, []).append((int(r["t_ns"]), float(r["value"])))

    def pick(self, names: tuple[str, ...], suffix: str = "") -> tuple[str, bool]:
        """(the first of ``names`` whose ``name + suffix`` has rows, True) or (names[0], False)."""
        for n in names:
            if n + suffix in self.by_name:
                return n, True
        return names[0], False

    def at(self, name: str, t_ns: int) -> Optional[float]:
        """Sum over label sets of each one's last value at or before t_ns (None: no such row)."""
        total, seen = 0.0, False
        for pts in self.by_name.get(name, {}).values():
            i = bisect.bisect_right(pts, (t_ns, float("inf"))) - 1
            if i >= 0:
                total += pts[i][1]
                seen = True
        return total if seen else None

    def delta(self, name: str, a: int, b: int) -> Optional[float]:
        va, vb = self.at(name, a), self.at(name, b)
        if vb is None:
            return None
        d = vb - (va or 0.0)
        return d if d >= 0 else None          # a counter reset (server restarted): no delta

    def bucket_deltas(self, base: str, a: int, b: int) -> list[tuple[float, float]]:
        """[(upper bound s, Δ cumulative count)] of ``base``_bucket, summed over label sets."""
        by_le: dict[float, float] = defaultdict(float)
        for key, pts in self.by_name.get(base + "_bucket", {}).items():
            le = float(dict(key)["le"])
            ia = bisect.bisect_right(pts, (a, float("inf"))) - 1
            ib = bisect.bisect_right(pts, (b, float("inf"))) - 1
            if ib >= 0:
                by_le[le] += pts[ib][1] - (pts[ia][1] if ia >= 0 else 0.0)
        return sorted(by_le.items())

    def gauge(self, name: str, a: int, b: int) -> list[float]:
        """The gauge (summed over label sets) at each good scrape in [a, b]."""
        return [v for t in self.scrapes if a <= t <= b for v in [self.at(name, t)] if v is not None]


def _fig(value, unit: str, evidence: str, metric: Optional[str], **kw) -> dict:
    return {"value": value, "unit": unit, "evidence": evidence, "metric": metric, **kw}


def _missing(unit: str, metric: Optional[str], reason: str) -> dict:
    return _fig(None, unit, "unmeasured", metric, reason=reason)


def window_edges(s: Series, window: tuple[int, int]) -> tuple[Optional[int], Optional[int], list]:
    """(start edge, end edge, notes): the last good scrape ≤ t0 and the first ≥ end."""
    t0, t1 = window
    notes = []
    if not s.scrapes:
        return None, None, ["no successful scrape"]
    i = bisect.bisect_right(s.scrapes, t0) - 1
    if i < 0:
        start = s.scrapes[0]
        notes.append("first scrape came after t0: requests before it are not in the deltas")
    else:
        start = s.scrapes[i]
    j = bisect.bisect_left(s.scrapes, t1)
    if j >= len(s.scrapes):
        end = s.scrapes[-1]
        notes.append("last scrape came before the window end: late requests may be missing")
    else:
        end = s.scrapes[j]
    if end <= start:
        return None, None, notes + ["no scrape interval covers the window"]
    return start, end, notes


def _hist_mean(s: Series, base: str, a: int, b: int) -> dict:
    dsum, dcount = s.delta(base + "_sum", a, b), s.delta(base + "_count", a, b)
    if dsum is None or dcount is None:
        return _missing("ms", base, f"the server exposes no {base} (or it was reset)")
    if dcount == 0:
        return _missing("ms", base, f"{base}_count did not grow in the window: no observations")
    return _fig(dsum / dcount * 1e3, "ms", "measured", base, count=int(dcount))


def _hist_quantile(s: Series, base: str, a: int, b: int, q: float) -> dict:
    """Prometheus-style histogram_quantile over the window: linear inside the bucket."""
    bd = s.bucket_deltas(base, a, b)
    if not bd or bd[-1][1] <= 0:
        return _missing("ms", base, f"no {base} bucket observations in the window")
    total, rank = bd[-1][1], q * bd[-1][1]
    lo, lo_c = 0.0, 0.0
    for le, c in bd:
        if c >= rank:
            if le == float("inf"):
                if len(bd) == 1:
                    return _missing("ms", base, f"{base} has no finite buckets")
                return _fig(lo * 1e3, "ms", "calculated", base, count=int(total),
                            bucket_ms=[lo * 1e3, None],
                            note="above the highest finite bucket: a lower bound")
            v = lo + (le - lo) * (rank - lo_c) / (c - lo_c) if c > lo_c else le
            return _fig(v * 1e3, "ms", "calculated", base, count=int(total),
                        bucket_ms=[lo * 1e3, le * 1e3], note="interpolated inside its bucket")
        lo, lo_c = le, c
    return _missing("ms", base, "inconsistent buckets")


def client_ttft_mean_ms(records: list[dict]) -> tuple[Optional[float], int]:
    vals = [(r["first_token_at_ns"] - r["sent_at_ns"]) / 1e6 for r in records
            if r.get("phase") != "warmup" and r.get("status") == "ok"
            and r.get("first_token_at_ns") is not None and r.get("sent_at_ns") is not None]
    return (sum(vals) / len(vals) if vals else None), len(vals)


def decomposition(client_ms: Optional[float], n_client: int, figs: dict) -> dict:
    """client TTFT = network/client + server queue + server prefill + server other (residual)."""
    ttft, queue, prefill = (figs[k]["value"] for k in ("server_ttft", "server_queue",
                                                      "server_prefill"))
    if client_ms is None:
        return {"status": "unmeasured", "reason": "no completed streamed measured request "
                "with a first token (client TTFT)"}
    out: dict[str, Any] = {"status": "calculated", "client_ttft_mean_ms": client_ms,
                           "client_requests": n_client,
                           "server_requests": figs["server_ttft"].get("count"),
                           "server_ttft_mean_ms": ttft,
                           "server_queue_ms": queue, "server_prefill_ms": prefill}
    out["network_client_ms"] = client_ms - ttft if ttft is not None else None
    out["server_other_ms"] = (ttft - queue - prefill
                              if None not in (ttft, queue, prefill) else None)
    out["residual_ms"] = (client_ms - queue - prefill if None not in (queue, prefill) else None)
    out["queue_share"] = queue / client_ms if queue is not None and client_ms > 0 else None
    missing = [k for k, v in (("server TTFT", ttft), ("queue time", queue),
                              ("prefill time", prefill)) if v is None]
    out["reason"] = (f"server did not report {', '.join(missing)}: those parts are not split"
                     if missing else None)
    out["note"] = ("means over different sets when the server's request count differs from "
                   "the client's (other traffic, window edges); residual = client TTFT − queue "
                   "− prefill = network/client + server other")
    return out


def summarize_server_metrics(rows: list[dict], window: Optional[tuple[int, int]],
                             records: list[dict], scraper: Optional[dict] = None) -> dict:
    """The summary's "server_metrics" object from rows, the measured window and the records."""
    scraper = scraper or {}
    if scraper.get("status") == "unavailable" or not rows:
        why = scraper.get("reason") or scraper.get("first_error") or (
            "scraping was off" if scraper.get("status") == "off" else f"no {FILE}")
        return {"status": "unmeasured", "reason": why, "source": scraper.get("url")}
    s = Series(rows)
    if window is None and "measure_start" in s.marks and "measure_end" in s.marks:
        window = (s.marks["measure_start"], s.marks["measure_end"])
    if window is None or None in window:
        return {"status": "unmeasured", "reason": "no measured window (t0/end) in meta.json",
                "source": scraper.get("url")}
    a, b, notes = window_edges(s, window)
    if a is None:
        return {"status": "unmeasured", "reason": "; ".join(notes), "source": scraper.get("url")}
    bases = {k: s.pick(v, "_count")[0] for k, v in HISTOGRAMS.items()}
    figs: dict[str, dict] = {k: _hist_mean(s, v, a, b) for k, v in bases.items()}
    for k, (h, q) in QUANTILES.items():
        figs[k] = _hist_quantile(s, bases[h], a, b, q)
    for key, names, unit, how in (("max_running", RUNNING, "count", "max"),
                                  ("max_waiting", WAITING, "count", "max"),
                                  ("kv_usage_mean", KV_USAGE, "fraction", "mean"),
                                  ("kv_usage_max", KV_USAGE, "fraction", "max")):
        name, present = s.pick(names)
        vals = s.gauge(name, a, b) if present else []
        if not vals:
            figs[key] = _missing(unit, name, "not exposed by the server")
        else:
            v = max(vals) if how == "max" else sum(vals) / len(vals)
            figs[key] = _fig(v, unit, "measured", name, samples=len(vals))
    (hits, has_h), (queries, has_q) = s.pick(PREFIX_HITS), s.pick(PREFIX_QUERIES)
    dq, dh = s.delta(queries, a, b), s.delta(hits, a, b)
    if not (has_h and has_q):
        figs["prefix_cache_hit_rate"] = _missing("fraction", queries,
                                                 "the server exposes no prefix-cache counters")
    elif not dq or dh is None:
        figs["prefix_cache_hit_rate"] = _missing("fraction", queries,
                                                 "no prefix-cache queries in the window")
    else:
        figs["prefix_cache_hit_rate"] = _fig(dh / dq, "fraction", "measured", hits,
                                             queried_tokens=int(dq), hit_tokens=int(dh))
    span_s = (b - a) / 1e9
    for key, name in (("server_prompt_tokens", PROMPT_TOKENS), ("server_generation_tokens",
                                                                GEN_TOKENS)):
        name = s.pick(name)[0]
        d = s.delta(name, a, b)
        figs[key] = (_fig(int(d), "tokens", "measured", name, per_s=d / span_s)
                     if d is not None else _missing("tokens", name, "not exposed"))
    client_ms, n_client = client_ttft_mean_ms(records)
    return {"status": "measured", "reason": None, "source": scraper.get("url"),
            "scrapes": len(s.scrapes), "scrapes_failed": scraper.get("scrapes_failed"),
            "window": {"start_edge_ns": a, "end_edge_ns": b, "span_s": span_s,
                       "start_lead_ms": (window[0] - a) / 1e6,
                       "end_lag_ms": (b - window[1]) / 1e6, "notes": notes},
            "figures": figs, "ttft_decomposition": decomposition(client_ms, n_client, figs)}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def server_metrics_summary(run_dir: str | Path) -> dict:
    """summary.json's "server_metrics" for a run directory."""
    d = Path(run_dir)
    meta = _read_json(d / "meta.json")
    window = (meta.get("t0_ns"), meta.get("end_ns")) if meta.get("t0_ns") else None
    records = _read_jsonl(d / "records.jsonl")
    return summarize_server_metrics(read_rows(d / FILE), window, records,
                                    meta.get("server_metrics"))

