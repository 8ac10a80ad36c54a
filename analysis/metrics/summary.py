"""summary.json: the stable figures of one run, computed from its records and meta.

    run_dir/records.jsonl, meta.json, sut.json, power.jsonl (+ probe_stream.jsonl) ─► load_run / load_power
        (read_checked: records that fail analysis.contract.sanity are left out of every figure;
         with_faults: the verdict INVALID, one reason per rule broken, records_excluded)
        ─► summarize(records, meta, power_rows) ─► dict
    summarize_run(run_dir): the one summary of a run (+ server metrics) ─► store_summary
        ─► analysis.contract.Summary.dump ─► summary.json ─► summary_of(run_dir) (report, open_run)
meta.json and sut.json are read through analysis.contract (RunMeta, Sut): one typed reading.

Key names are a contract (users' scripts read them). Counts and figures cover the measured phase
only (warm-up excluded); latency distributions use completed requests; cancelled requests are
counted apart in ``requests_cancelled``. Every figure here is client-side and "measured".
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from analysis.atomic import write_text
from analysis.contract import SCHEMA_VERSION, ContractError, RunMeta, Summary, Sut, sanity
from analysis.contract.records import Records, read_table, table_of
from analysis.contract.sanity import record_faults, slack_for
from analysis.contract.meta import ClientTransport
from analysis.contract.power import PowerSource
from analysis.contract.summary import SteadyState
from analysis.contract.summary_blocks import Energy, nonfinite_keys
from analysis.contract.rundir import read_json, read_rows, records_path
from analysis.metrics import figures as m
from analysis.metrics import slo as slo_mod
from analysis.metrics import saturation as saturation_mod
from analysis.metrics import hangups
from analysis.metrics.accuracy import accuracy_block
from analysis.metrics.cost import run_cost
from analysis.metrics.embeddings import embeddings_block
from analysis.metrics.images import images_block
from analysis.metrics.models import models_block
from analysis.metrics.audio import audio_block
from analysis.metrics.probe_stream import probe_block
from analysis.metrics.replicas import replicas_block
from analysis.metrics.stages import stage_summaries
from analysis.metrics.structured import structured_block
from analysis.metrics.prefix_cache import prefix_cache_block
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
        src = PowerSource.of(s)
        names.append(s if isinstance(s, str) else (src.kind or src.name or src.source))
    return not names or all(n in (None, "none") for n in names)


def energy_block(records: Records, meta: dict, power_rows: Optional[list[dict]],
                 win: Optional[tuple[int, int]], steady: Optional[dict] = None) -> dict:
    """The "energy" object. "unmeasured" with the reason when no power source was configured, the
    energy module is missing, or sources were only named (no sampling session described them) and
    no samples exist; otherwise analysis.energy.window.energy_summary(rows, records, window, sources),
    which explains per source why a figure is missing.

    Window: the steady-state window when ``steady`` (analysis.metrics.steady) is "ok" (ML.ENERGY's
    steady-state method; records of every phase, as that window is a time slice and warm-up
    requests still running in it drew power and produced tokens in it), else ``win`` with the
    measured records. ``window_rule`` says which (present when a window was used)."""
    st = SteadyState.read(steady) if steady else None
    if st and st.status == "ok":
        win, recs = (st.start_ns, st.end_ns), records
        rule = f"steady-state window: {st.rule}"
    else:
        recs = m.measured(records)
        rule = "full window: " + m.WINDOW_RULE + (
            f" (steady-state window unavailable: {st.reason})" if st else "")
    out = _energy_block(recs, meta, power_rows, win)
    if out.get("window") is not None:  # a window was used (the no-source object stays as it is)
        out["window_rule"] = rule
    return out


def _energy_block(recs: Records, meta: dict, power_rows: Optional[list[dict]],
                  win: Optional[tuple[int, int]]) -> dict:
    sources = RunMeta.read(meta).power_sources
    if _no_power(sources):
        return {"status": "unmeasured", "reason": "no power source configured"}
    from analysis.energy.window import energy_summary
    if not power_rows and all(isinstance(s, str) for s in sources):
        return {"status": "unmeasured", "reason": f"power source(s) {', '.join(sources)} configured "
                "but no sampling session ran and power.jsonl holds no samples"}
    srcs = [s if isinstance(s, dict) else {"name": s} for s in sources]
    try:
        return energy_summary(power_rows or [], recs, win, srcs)
    except Exception as e:  # an energy bug must not hide the latency figures
        return {"status": "unmeasured", "reason": f"energy_summary failed: {type(e).__name__}: {e}"}


def _transport_figures(recs: Records, meta: RunMeta) -> dict:
    """How the client stamped (meta ``client_transport``) and how many of the measured records'
    (of ``recs``) reads carried more than one token chunk (``coalesced_reads``: all but the last chunk of such
    a read share its stamp, so may be late), as a share of the reads that carried any token
    chunk (distinct chunk stamps). None where the transport does not count them (aiohttp)."""
    tr = meta.client_transport or ClientTransport()
    coalesced, share = saturation_mod.coalesced_share(recs)
    return {"transport": tr.transport, "stamp_source": tr.stamp_source,
            "coalesced_reads": coalesced, "coalesced_reads_share": share,
            "coalesced_reads_rule": "reads with > 1 token chunk / reads with any token chunk, "
                                    "measured records"}


def client_block(records: Records, meta: dict | RunMeta, slo: dict) -> dict:
    """Client health: CPU share, loop lag, schedule lag; ``saturated`` with ``reasons``
    ([{"rule", "value", "limit"}], analysis.metrics.saturation: only what changed the measurement)
    and one warning line per reason; the transport, its stamp source and the coalesced reads."""
    meta = RunMeta.read(meta)
    cpu = _client_cpu(meta)
    sat = saturation_mod.saturation(records, meta, slo)
    return {**_transport_figures(records, meta),
            "cpu_fraction": cpu, "cpu_saturation_threshold": slo_mod.CPU_SATURATION,
            "loop_lag_ms_p99": sat["figures"]["loop_lag_ms_p99"],
            "schedule_lag_ms_p99": sat["figures"]["schedule_lag_ms_p99"],
            "lag_growth_ms": m.lag_growth_ms(records),
            "lag_growth_rule": "median lag, last third − first third",
            "achieved_send_rate": m.stamp_rate(records, "sent_at_ns"),
            "schedule_rate": m.stamp_rate(records, "scheduled_at_ns"),
            "target_rate": meta.rate, "meta_scheduled_rate": meta.scheduled_rate,
            "saturated": sat["saturated"], "reasons": sat["reasons"],
            "saturation_limits": sat["limits"], "warnings": sat["warnings"],
            "host": sat["host"],     # the host's load over the run (meta host_load), or None
            **({"processes": sat["processes"]} if "processes" in sat else {}),
            "evidence": "measured" if cpu is not None else "unmeasured"}


def summarize(records: Records, meta: dict, power_rows: Optional[list[dict]] = None) -> dict:
    """The summary.json dict for one run (see the module docstring and docs/metrics.md)."""
    mm = RunMeta.read(meta, "meta")             # typed; older forms normalised (client_cpu)
    meta = mm.as_dict()
    mode = mm.mode
    slo, _ = slo_mod.resolve_slo_lenient(mm.slo)
    recs = m.measured(records)
    done = m.completed(recs)
    win = m.window(records)
    server = m.open_loop(mode)
    series = m.latency_series(records)              # arrays (analysis.contract.timing)
    out: dict = {
        "schema_version": SCHEMA_VERSION,
        "summary_version": SUMMARY_VERSION,
        "mode": mode,
        "requests_completed": len(done),
        "requests_failed": len(m.failed(recs)),
        "requests_cancelled": len(m.cancelled(recs)),
        "requests_warmup": len(records) - len(recs),
        "unsent_requests": mm.unsent_requests,      # the closed loop's never-sent rest (a count)
        "duration_s": m.duration_s(win),
        "window": {"rule": m.WINDOW_RULE, "start_ns": win[0] if win else None,
                   "end_ns": win[1] if win else None},
        "request_throughput": m.request_throughput(records, win),
        "output_throughput": m.output_throughput(records, win),
        "total_token_throughput": m.total_token_throughput(records, win),
        **slo_mod.goodput_fields(records, slo, meta, win, from_scheduled=server),
        "headline_ttft": "ttft_from_scheduled_ms" if server else "ttft_ms",
    }
    for key in LATENCY_KEYS:
        s = m.stats(series[key])
        out[key] = {k: s[k] for k in STAT_FIELDS} | {"count": s["count"]}
    out["failures_by_kind"] = m.failures_by_kind(records)
    # stale keep-alive retries (records' "retries") and what the start-up probe found (meta "probe")
    out["requests_retried"] = sum(map(bool, m.field(recs, "retries")))
    out["dropped_fields"] = list(mm.probe.dropped_fields) if mm.probe else []
    out["warnings"] = list(mm.probe.warnings) if mm.probe else []
    if mm.cache_hygiene and mm.cache_hygiene.warning:   # a sweep point after others (run/sweep)
        out["warnings"].append(mm.cache_hygiene.warning)
    capped = sum(1 for v in m.field(recs, "chunks_unstamped") if v)
    if capped:                  # the stamp cap (api.limits.max_chunk_stamps): ITL from what was kept
        out["warnings"].append(
            f"{capped} measured request(s) streamed more chunks than api.limits.max_chunk_stamps: "
            "ITL and chunk gaps use their first stamps only (records' chunks_unstamped counts "
            "the rest); TTFT, TPOT, E2E and token counts include every chunk")
    out["token_counts"] = m.token_provenance(records)
    out["client"] = client_block(records, mm, slo)
    out["slo"] = slo
    out["verdict"] = slo_mod.verdict(records, mm)
    out["steady_state"] = steady_window(records, meta)
    out["stages"] = stage_summaries(records, meta)
    out["sessions"] = sessions_block(records)
    out["images"] = images_block(records, meta)
    out["replicas"] = replicas_block(records, slo if out["goodput"] is not None else None, server)
    out["reasoning"] = reasoning_block(records)
    out["embeddings"] = embeddings_block(records, meta)
    out["structured"] = structured_block(records)          # tools / response_format checks
    out["models"] = models_block(records, slo if out["goodput"] is not None else None, server)
    out["prefix_cache"] = prefix_cache_block(records)      # summarize_run adds the server's rate
    out["energy"] = energy_block(records, meta, power_rows, win, out["steady_state"])
    hangups.fill(out, records, meta)        # load.cancel / api.retry (metrics/hangups.py)
    out["accuracy"] = accuracy_block(records, meta)     # workload.dataset: answers checked
    out["cost"] = run_cost(records, meta, slo, out, server)   # the scenario's cost block
    out["evidence"] = {"latencies": "measured (client-side, perf_counter_ns)",
                       "throughput": "measured", "energy": Energy.read(out["energy"]).status}
    out["audio"] = audio_block(records, meta)                 # transcriptions: RTFx
    return out


def _read_jsonl(path: Path) -> list[dict]:
    return read_rows(path)


def _read_json(path: Path) -> dict:
    return read_json(path) or {}


def load_run(run_dir: str | Path) -> tuple[list[dict], dict, dict]:
    """(records, meta, sut) of a run directory; meta/sut are {} when their files are missing.
    meta and sut pass through their models (ContractError naming a field that does not fit);
    the records that fail analysis.contract.sanity (ids, time order, token counts) are left
    out (read_checked says which and why)."""
    records, meta, sut, _ = read_checked(run_dir)
    return records, meta, sut


def read_checked(run_dir: str | Path):
    """(records without the faulty ones, meta, sut, Faults over every line of records.jsonl)."""
    d = Path(run_dir)
    rec_path = records_path(d)                     # records.arrow where there is one
    if not rec_path.is_file():
        raise FileNotFoundError(f"{d}: no records.jsonl (not a run directory?)")
    meta_p, sut_p = d / "meta.json", d / "sut.json"
    meta = RunMeta.read_file(meta_p).as_dict() if meta_p.is_file() else {}
    sut = Sut.read_file(sut_p).as_dict() if sut_p.is_file() else {}
    table = read_table(rec_path)
    faults = record_faults(table, slack_for(meta))
    records = table.records if not faults.count else faults.keep(table.records)
    return records, meta, sut, faults


def with_faults(v: dict, faults, records: list, planned) -> dict:
    """The verdict with the records check (analysis.contract.sanity): INVALID, one reason per
    rule broken, when a record was left out of the figures, or more distinct measured request
    ids than planned; ``records_excluded`` counts the records left out."""
    reasons = [f"{r}: excluded from the figures" for r in faults.reasons()]
    ids, ok = table_of(m.measured(records)).stamp("id") if planned is not None else ([], [])
    extra = sanity.planned_excess(ids[ok], planned) if len(ids) > (planned or 0) else None
    if extra:
        reasons.append(f"{extra}: records.jsonl holds requests the plan does not")
    check = {"name": "records_consistent", "ok": not reasons, "value": faults.count,
             "limit": 0}
    return {**v, "valid": v["valid"] and not reasons, "reasons": list(v["reasons"]) + reasons,
            "checks": list(v["checks"]) + [check], "records_excluded": faults.count}


def load_power(run_dir: str | Path) -> list[dict]:
    """power.jsonl rows, or [] when the file is absent."""
    p = Path(run_dir) / "power.jsonl"
    return _read_jsonl(p) if p.is_file() else []


def summarize_run(run_dir: str | Path, meta: Optional[dict] = None) -> dict:
    """The summary of a run directory: summarize() over its files, with the server's /metrics
    figures. The one function both engines, ``loadgen report`` and open_run use. ``meta``: the
    writer's meta.json content (default: read from the directory)."""
    records, file_meta, _sut, faults = read_checked(run_dir)
    meta = file_meta if meta is None else RunMeta.read(meta).as_dict()
    src = Path(run_dir) / "power_sources.json"
    if not RunMeta.read(meta).power_sources and src.is_file():  # the sampler's own description
        meta = {**meta, "power_sources": _read_json(src).get("sources") or []}
    from analysis.server.metrics import server_metrics_summary
    summary = summarize(records, meta, load_power(run_dir))
    from analysis.metrics.run_end import run_end      # no meta.json / records missing: INVALID
    end = run_end(run_dir, read_table(records_path(run_dir)).records, meta)
    summary["verdict"] = with_faults(slo_mod.with_run_end(summary["verdict"], end), faults,
                                     records, end["planned"])
    summary["server_metrics"] = server_metrics_summary(run_dir)
    summary["prefix_cache"] = prefix_cache_block(records, summary["server_metrics"])
    probes = Path(run_dir) / "probe_stream.jsonl"        # load.probe's side stream
    summary["probe_stream"] = probe_block(_read_jsonl(probes) if probes.is_file() else [], meta)
    from analysis.roofline.run_roofline import for_run as roofline_for_run  # frozen device.json
    summary["roofline"] = roofline_for_run(run_dir, records)
    from analysis.server.spec_decode import spec_decode_summary   # counters + client bursts
    summary["spec_decode"] = spec_decode_summary(run_dir, records)
    from analysis.server.timing_summary import server_timing_block   # server_traces' spans
    summary["server_timing"] = server_timing_block(run_dir, records)
    from analysis.metrics.capacity import capacity_fields   # per user, per accelerator, J/token
    summary.update(capacity_fields(summary, records, _sut))
    return summary


def store_summary(run_dir: str | Path, meta: Optional[dict] = None,
                  name: str = "summary.json") -> dict:
    """summarize_run, written to run_dir/summary.json (``name``) through the contract
    (Summary.dump: closed keys, schema_version; a non-finite figure is written as null); returns
    what it wrote. Interruptible: the file appears whole (a temporary file, then os.replace) or
    not at all, so a Ctrl-C while summarising leaves the run for ``loadgen report DIR``."""
    out = Summary.dump(_finite(summarize_run(run_dir, meta)))
    path = Path(run_dir) / name
    write_text(path, json.dumps(out, indent=2, allow_nan=False) + "\n")   # analysis.atomic
    return out


def write_summary(run_dir: str | Path, meta: Optional[dict] = None) -> Path:
    """store_summary; returns the path of summary.json."""
    store_summary(run_dir, meta)
    return Path(run_dir) / "summary.json"


def load_summary(run_dir: str | Path) -> Optional[dict]:
    """summary.json through the contract when it was written by this contract version; None
    when absent, older (no or another schema_version), not matching, or holding a NaN / Infinity
    (then: summarize_run)."""
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        return None
    try:
        s = Summary.read_file(path)
    except ContractError:
        return None
    if s.schema_version != SCHEMA_VERSION:
        return None
    d = s.as_dict()
    return None if nonfinite_keys(d) else d       # NaN / Infinity: edited, recomputed


def summary_of(run_dir: str | Path) -> dict:
    """What the run computed (summary.json), else computed now by the same function."""
    s = load_summary(run_dir)
    return s if s is not None else summarize_run(run_dir)


def _finite(v):
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v
