"""summary.json: the stable figures of one run, computed from its records and meta.

    run_dir/records.jsonl, meta.json, sut.json, power.jsonl ─► load_run / load_power
        ─► summarize(records, meta, power_rows) ─► dict (summary.json)

Key names are a contract (users' scripts read them). Counts and figures cover the measured phase
only (warm-up excluded); latency distributions use completed requests; cancelled requests are
counted apart in ``requests_cancelled``. Every figure here is client-side and "measured".
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from analysis.metrics import metrics as m
from analysis.metrics import slo as slo_mod
from analysis.metrics.stages import stage_summaries
from analysis.metrics.steady import steady_window
from analysis.metrics.turns import reasoning_block, sessions_block

SUMMARY_VERSION = 1
LATENCY_KEYS = ("ttft_ms", "ttft_from_scheduled_ms", "tpot_ms", "itl_ms", "e2el_ms",
                "e2el_from_scheduled_ms", "schedule_lag_ms", "chunk_gap_ms")
STAT_FIELDS = ("mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max")


_client_cpu = slo_mod.client_cpu  # the same CPU figure as the verdict's


def _no_power(sources) -> bool:
    names = []
    for s in sources or []:
        names.append(s if isinstance(s, str) else (s.get("kind") or s.get("name") or s.get("source")))
    return not names or all(n in (None, "none") for n in names)


def energy_block(records: list[dict], meta: dict, power_rows: Optional[list[dict]],
                 win: Optional[tuple[int, int]], steady: Optional[dict] = None) -> dict:
    """The "energy" object. "unmeasured" with the reason when no power source was configured, the
    energy module is missing, or sources were only named (no sampling session described them) and
    no samples exist; otherwise analysis.energy.energy.energy_summary(rows, records, window, sources),
    which explains per source why a figure is missing.

    Window: the steady-state window when ``steady`` (analysis.metrics.steady) is "ok" (ML.ENERGY's
    steady-state method; records of every phase, as that window is a time slice and warm-up
    requests still running in it drew power and produced tokens in it), else ``win`` with the
    measured records. ``window_rule`` says which (present when a window was used)."""
    if steady and steady.get("status") == "ok":
        win, recs = (steady["start_ns"], steady["end_ns"]), list(records)
        rule = f"steady-state window: {steady['rule']}"
    else:
        recs = m.measured(records)
        rule = "full window: " + m.WINDOW_RULE + (
            f" (steady-state window unavailable: {steady.get('reason')})" if steady else "")
    out = _energy_block(recs, meta, power_rows, win)
    if out.get("window") is not None:  # a window was used (the no-source object stays as it is)
        out["window_rule"] = rule
    return out


def _energy_block(recs: list[dict], meta: dict, power_rows: Optional[list[dict]],
                  win: Optional[tuple[int, int]]) -> dict:
    sources = meta.get("power_sources")
    if _no_power(sources):
        return {"status": "unmeasured", "reason": "no power source configured"}
    try:
        from analysis.energy.energy import energy_summary  # lazy: written by the energy helper
    except ImportError as e:
        return {"status": "unmeasured", "reason": f"analysis.energy.energy not available ({e})"}
    if not power_rows and all(isinstance(s, str) for s in sources):
        return {"status": "unmeasured", "reason": f"power source(s) {', '.join(sources)} configured "
                "but no sampling session ran and power.jsonl holds no samples"}
    srcs = [s if isinstance(s, dict) else {"name": s} for s in sources]
    try:
        return energy_summary(power_rows or [], recs, win, srcs)
    except Exception as e:  # an energy bug must not hide the latency figures
        return {"status": "unmeasured", "reason": f"energy_summary failed: {type(e).__name__}: {e}"}


def _transport_figures(recs: list[dict], meta: dict) -> dict:
    """How the client stamped (meta ``client_transport``) and how many of the measured records'
    reads carried more than one token chunk (``coalesced_reads``: all but the last chunk of such
    a read share its stamp, so may be late), as a share of the reads that carried any token
    chunk (distinct chunk stamps). None where the transport does not count them (aiohttp)."""
    tr = meta.get("client_transport") or {}
    counted = [r for r in recs if r.get("coalesced_reads") is not None]
    coalesced = sum(r["coalesced_reads"] for r in counted) if counted else None
    token_reads = sum(len({c[0] for c in r.get("chunks") or () if c[1]}) for r in counted)
    share = coalesced / token_reads if coalesced is not None and token_reads else None
    return {"transport": tr.get("transport"), "stamp_source": tr.get("stamp_source"),
            "coalesced_reads": coalesced, "coalesced_reads_share": share,
            "coalesced_reads_rule": "reads with > 1 token chunk / reads with any token chunk, "
                                    "measured records"}


def client_block(records: list[dict], meta: dict, slo: dict) -> dict:
    """Client health: CPU share, schedule-lag growth, a ``saturated`` flag and warning text;
    the transport, its stamp source and the coalesced reads (``_transport_figures``)."""
    cpu = _client_cpu(meta)
    growth = m.lag_growth_ms(records)
    lim = float(slo["max_schedule_lag_ms"])
    warnings = []
    if cpu is not None and cpu >= slo_mod.CPU_SATURATION:
        warnings.append(f"client process used {cpu:.0%} of a core: latencies may include client "
                        "queueing and should not be read as the server's")
    loop_lag = (meta.get("client_load") or {}).get("loop_lag_ms_p99")
    if loop_lag is not None and loop_lag > slo_mod.LOOP_LAG_MS:
        warnings.append(f"client event-loop lag p99 {loop_lag:.1f} ms (> {slo_mod.LOOP_LAG_MS} ms): "
                        "the client stamped arrivals late; latencies may be inflated by the client")
    # offline: every request is scheduled at t0 and waits for a free slot, so lag grows by design
    if growth is not None and growth > lim and meta.get("mode") != "offline":
        warnings.append(f"schedule lag grew by {growth:.1f} ms over the run (> {lim} ms): the "
                        "client (or its in-flight cap) fell behind its schedule; latencies from "
                        "send may hide the wait, read the from-scheduled figures")
    recs = m.measured(records)
    return {**_transport_figures(recs, meta),
            "cpu_fraction": cpu, "cpu_saturation_threshold": slo_mod.CPU_SATURATION,
            "loop_lag_ms_p99": loop_lag, "lag_growth_ms": growth,
            "lag_growth_rule": "median lag, last third − first third",
            "achieved_send_rate": m.rate_of(r.get("sent_at_ns") for r in recs),
            "schedule_rate": m.rate_of(r.get("scheduled_at_ns") for r in recs),
            "target_rate": meta.get("rate"), "meta_scheduled_rate": meta.get("scheduled_rate"),
            "saturated": bool(warnings), "warnings": warnings,
            "evidence": "measured" if cpu is not None else "unmeasured"}


def summarize(records: list[dict], meta: dict, power_rows: Optional[list[dict]] = None) -> dict:
    """The summary.json dict for one run (see the module docstring and docs/metrics.md)."""
    meta = meta or {}
    mode = meta.get("mode")
    slo, _ = slo_mod.resolve_slo_lenient(meta.get("slo"))
    recs = m.measured(records)
    done = m.completed(recs)
    sent = [r for r in recs if r.get("status") in ("ok", "error")]
    win = m.window(records)
    server = m.open_loop(mode)
    series = {
        "ttft_ms": [m.ttft_ms(r) for r in done],
        "ttft_from_scheduled_ms": [m.ttft_from_scheduled_ms(r) for r in done],
        "tpot_ms": [m.tpot_ms(r) for r in done],
        "itl_ms": m.pooled(done, m.itl_ms),
        "e2el_ms": [m.e2el_ms(r) for r in done],
        "e2el_from_scheduled_ms": [m.e2el_from_scheduled_ms(r) for r in done],
        "schedule_lag_ms": [m.schedule_lag_ms(r) for r in sent],
        "chunk_gap_ms": m.pooled(done, m.chunk_gaps_ms),
    }
    out: dict = {
        "summary_version": SUMMARY_VERSION,
        "mode": mode,
        "requests_completed": len(done),
        "requests_failed": len(m.failed(recs)),
        "requests_cancelled": len(m.cancelled(recs)),
        "requests_warmup": len(records) - len(recs),
        "duration_s": m.duration_s(win),
        "window": {"rule": m.WINDOW_RULE, "start_ns": win[0] if win else None,
                   "end_ns": win[1] if win else None},
        "request_throughput": m.request_throughput(records, win),
        "output_throughput": m.output_throughput(records, win),
        "total_token_throughput": m.total_token_throughput(records, win),
        "goodput": m.goodput(records, slo, win, from_scheduled=server),
        "goodput_rule": ("requests/s meeting every configured limit (TTFT"
                         + (" and E2E from scheduled" if server else "")
                         + "; no TPOT/ITL value fails that limit)"),
        "headline_ttft": "ttft_from_scheduled_ms" if server else "ttft_ms",
    }
    for key in LATENCY_KEYS:
        s = m.stats(series[key])
        out[key] = {k: s[k] for k in STAT_FIELDS} | {"count": s["count"]}
    out["failures_by_kind"] = m.failures_by_kind(records)
    # stale keep-alive retries (records' "retries") and what the start-up probe found (meta "probe")
    out["requests_retried"] = sum(1 for r in recs if r.get("retries"))
    probe = meta.get("probe") or {}
    out["dropped_fields"] = list(probe.get("dropped_fields") or [])
    out["warnings"] = list(probe.get("warnings") or [])
    hygiene = meta.get("cache_hygiene") or {}     # a sweep point after others (loadgen/run/sweep)
    if hygiene.get("warning"):
        out["warnings"].append(hygiene["warning"])
    out["token_counts"] = m.token_provenance(records)
    out["client"] = client_block(records, meta, slo)
    out["slo"] = slo
    out["verdict"] = slo_mod.verdict(records, meta)
    out["steady_state"] = steady_window(records, meta)
    out["stages"] = stage_summaries(records, meta)
    out["sessions"] = sessions_block(records)
    out["reasoning"] = reasoning_block(records)
    out["energy"] = energy_block(records, meta, power_rows, win, out["steady_state"])
    out["evidence"] = {"latencies": "measured (client-side, perf_counter_ns)",
                       "throughput": "measured", "energy": out["energy"].get("status")}
    return out


def _read_jsonl(path: Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a torn last line (killed mid-write)
                    continue
    return out


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def load_run(run_dir: str | Path) -> tuple[list[dict], dict, dict]:
    """(records, meta, sut) of a run directory; meta/sut are {} when their files are missing."""
    d = Path(run_dir)
    rec_path = d / "records.jsonl"
    if not rec_path.is_file():
        raise FileNotFoundError(f"{d}: no records.jsonl (not a run directory?)")
    return _read_jsonl(rec_path), _read_json(d / "meta.json"), _read_json(d / "sut.json")


def load_power(run_dir: str | Path) -> list[dict]:
    """power.jsonl rows, or [] when the file is absent."""
    p = Path(run_dir) / "power.jsonl"
    return _read_jsonl(p) if p.is_file() else []


def summarize_run(run_dir: str | Path) -> dict:
    """summarize() over the files of a run directory."""
    records, meta, _sut = load_run(run_dir)
    src = Path(run_dir) / "power_sources.json"
    if not meta.get("power_sources") and src.is_file():  # the sampler's own description
        meta = {**meta, "power_sources": _read_json(src).get("sources") or []}
    from analysis.server.metrics import server_metrics_summary
    summary = summarize(records, meta, load_power(run_dir))
    summary["server_metrics"] = server_metrics_summary(run_dir)
    return summary


def write_summary(run_dir: str | Path) -> Path:
    """Compute and write run_dir/summary.json; returns its path."""
    path = Path(run_dir) / "summary.json"
    path.write_text(json.dumps(summarize_run(run_dir), indent=2, allow_nan=False) + "\n")
    return path
