"""SLO presets (MLPerf Inference latency constraints) and the MLPerf-style run verdict.

    slo dict (scenario's Slo, maybe a preset name) ─► resolve_slo ─► limits
    limits + api.stream ─► stream_warnings (before a run: a preset's TTFT/TPOT on a
                           non-streamed run)
    records + meta ─► verdict ─► {"valid", "reasons", "checks", "notes"}
    records + limits + meta ─► goodput_fields ─► {"goodput", "goodput_rule"} (what it judged)

TTFT, TPOT and ITL need a streamed run (STREAM_ONLY): a non-streamed answer arrives whole, with
no first-token time. The scenario refuses such a limit given explicitly; one that comes from a
preset is warned about, fails the verdict with that reason, and leaves goodput None.

Presets are the P99 TTFT / TPOT limits (ms) that mlcommons/inference publishes in
``loadgen/mlperf.conf`` (keys ``<model>.Server.ttft_latency`` / ``tpot_latency``; the
"interactive" ones are the ``<model>-interactive.Server`` entries). Evidence: documented.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from analysis.contract import timing
from analysis.metrics import figures as m
from analysis.contract.records import Records
from analysis.metrics.client_load import CPU_SATURATION, LOOP_LAG_MS, client_cpu  # noqa: F401
from analysis.metrics.saturation import lag_cause
from analysis.contract.meta import RunMeta
from analysis.contract.summary_blocks import Slo

MLPERF_CONF = "mlcommons/inference loadgen/mlperf.conf"


@dataclass(frozen=True)
class SloPreset:
    ttft_ms: float
    tpot_ms: float
    percentile: float = 99.0
    source: str = MLPERF_CONF
    evidence: str = "documented"
    note: str = ""


MLPERF_COMMIT = "b66003e1 (2026-08-20, after 'Add random seeds for v6.1')"


def _conf(ttft_ms: float, tpot_ms: float, line: int) -> SloPreset:
    """A preset read from mlperf.conf: its ``ttft_latency`` line (``tpot_latency`` is the next)."""
    return SloPreset(ttft_ms, tpot_ms, source=f"{MLPERF_CONF} lines {line}-{line + 1}",
                     note=f"checked against mlperf.conf at commit {MLPERF_COMMIT}")


# MLPerf Inference v6.1's token-latency LLM benchmarks: <model>.Server.ttft_latency / tpot_latency
# ("server/...") and <model>-interactive.Server.* ("interactive/...", its own scenario since v6.1).
PRESETS: dict[str, SloPreset] = {
    "server/llama2-70b": _conf(2000, 200, 117),
    "interactive/llama2-70b": _conf(450, 40, 121),
    "server/mixtral-8x7b": _conf(2000, 200, 126),
    "server/llama3_1-405b": _conf(6000, 175, 130),
    "interactive/llama3_1-405b": _conf(4500, 80, 135),
    "server/llama3_1-8b": _conf(2000, 100, 140),
    "interactive/llama3_1-8b": _conf(500, 30, 145),
    "server/deepseek-r1": _conf(2000, 80, 149),
    "interactive/deepseek-r1": _conf(1500, 15, 154),
    "server/gpt-oss-120b": _conf(3000, 80, 158),
    "interactive/gpt-oss-120b": _conf(2000, 15, 163),
}
LIMIT_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
STREAM_ONLY = ("ttft_ms", "tpot_ms", "itl_ms")     # need a first-token time / token chunks
NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2el_ms": "E2E"}
# why a configured limit has no value although requests completed (a streamed run)
NO_DATA = {"ttft_ms": "no completed request had a first-token time",
           "tpot_ms": "every completed output had ≤ 1 token (TPOT needs 2 or more)",
           "itl_ms": "no completed stream had 2 or more token chunks",
           "e2el_ms": "no completed request had an end time"}


class UnknownPreset(ValueError):
    """An SLO preset name that is not in ``PRESETS``; ``str()`` is one line naming the field."""


def resolve_slo(slo: Optional[dict]) -> dict:
    """The effective SLO: a preset's limits, overridden by any limit given explicitly.

    Returns the Slo fields (preset, ttft_ms, tpot_ms, itl_ms, e2el_ms, percentile,
    max_schedule_lag_ms, min_rate_fraction) plus ``source`` for where the limits came from.
    """
    s = dict(slo or {})
    out = {"preset": s.get("preset"), "percentile": s.get("percentile") or 99.0,
           "max_schedule_lag_ms": s.get("max_schedule_lag_ms") or 10.0,
           "min_rate_fraction": s.get("min_rate_fraction") or 0.95, "source": "scenario"}
    for k in LIMIT_KEYS:
        out[k] = s.get(k)
    name = s.get("preset")
    if name:
        if name not in PRESETS:
            raise UnknownPreset(f"slo.preset: unknown preset '{name}' "
                                f"(known: {', '.join(sorted(PRESETS))})")
        p = PRESETS[name]
        out["ttft_ms"] = out["ttft_ms"] if out["ttft_ms"] is not None else p.ttft_ms
        out["tpot_ms"] = out["tpot_ms"] if out["tpot_ms"] is not None else p.tpot_ms
        if s.get("percentile") is None:
            out["percentile"] = p.percentile
        out["source"] = f"preset {name} ({p.source}; {p.evidence})"
    return out


def resolve_slo_lenient(slo: Optional[dict]) -> tuple[dict, Optional[str]]:
    """resolve_slo, but an unknown preset gives (the explicit limits only, the error message)
    instead of raising, so a finished run still gets its summary (and an INVALID verdict)."""
    try:
        return resolve_slo(slo), None
    except UnknownPreset as e:
        out = resolve_slo({k: v for k, v in (slo or {}).items() if k != "preset"})
        out["preset"], out["error"] = (slo or {}).get("preset"), str(e)
        return out, str(e)


def preset_table() -> list[dict]:
    """The presets as rows (for docs and reports)."""
    return [{"name": k, **asdict(v)} for k, v in PRESETS.items()]


def streamed(meta: dict | RunMeta) -> bool:
    """Whether the run streamed its answers (meta.json ``stream``; unrecorded: assumed so)."""
    return RunMeta.read(meta).stream is not False


def not_streamed_why(keys) -> str:
    names = "/".join(NAMES[k] for k in keys)
    return (f"{names} not measured: the run was not streamed (api.stream: false), so no answer "
            "has a first-token time; they need api.stream: true")


def stream_warnings(slo: Optional[dict], stream: bool) -> list[str]:
    """Before a run: the TTFT/TPOT/ITL limits a non-streamed run cannot measure (a preset's; an
    explicit one is refused by the scenario)."""
    if stream:
        return []
    limits, _ = resolve_slo_lenient(slo)
    keys = [k for k in STREAM_ONLY if limits.get(k) is not None]
    if not keys:
        return []
    return [f"slo: {not_streamed_why(keys)} ({limits['source']}): the verdict will be INVALID "
            f"and goodput not computed; set api.stream: true or drop slo.preset"]


def goodput_fields(records: Records, slo: dict, meta: dict, win,
                   from_scheduled: bool) -> dict:
    """summary.json's ``goodput`` (requests/s meeting every configured limit) and
    ``goodput_rule`` (the limits it judged, and how); goodput None when no limit is configured
    or one needs a streamed run that this one was not."""
    limits = Slo.read(slo)
    keys = [k for k in LIMIT_KEYS if getattr(limits, k) is not None]     # named: a typo raises
    if not keys:
        return {"goodput": None, "goodput_rule": "not computed: no per-request limit configured "
                "(slo.ttft_ms, tpot_ms, itl_ms, e2el_ms)"}
    lost = [k for k in keys if k in STREAM_ONLY] if not streamed(meta) else []
    if lost:
        return {"goodput": None, "goodput_rule": f"not computed: {not_streamed_why(lost)}"}
    used = []
    for k in keys:
        frm = " from scheduled" if from_scheduled and k in ("ttft_ms", "e2el_ms") else ""
        worst = " (largest per request)" if k == "itl_ms" else ""
        used.append(f"{NAMES[k]}{frm}{worst} ≤ {slo[k]:g} ms")
    rule = "requests/s meeting every limit: " + ", ".join(used) + f" ({limits.source})"
    if "tpot_ms" in keys or "itl_ms" in keys:
        rule += "; a request without a TPOT/ITL value (≤ 1 output token) fails that limit"
    return {"goodput": m.goodput(records, slo, win, from_scheduled), "goodput_rule": rule}


def _check(checks: list, reasons: list, name: str, ok: bool, value, limit, why: str) -> None:
    checks.append({"name": name, "ok": ok, "value": value, "limit": limit})
    if not ok:
        reasons.append(why)


def _fmt(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def verdict(records: Records, meta: dict | RunMeta) -> dict:
    """MLPerf-style verdict over the measured phase.

    INVALID (every failing rule listed in ``reasons``) when: no request completed; the run was
    interrupted; any measured request failed or was cancelled (rule: failures are not allowed);
    the window is shorter than ``min_duration_s`` or fewer than ``min_queries`` completed; a
    configured pNN limit (TTFT, TPOT, ITL, E2E; pNN = slo.percentile) is exceeded or has no data.
    Server mode also: TTFT/E2E are taken from scheduled_at; achieved send rate must be
    ≥ min_rate_fraction × the schedule's own rate; p99 schedule lag ≤ max_schedule_lag_ms;
    client CPU < CPU_SATURATION (an unrecorded CPU figure is a note, not a failure). A client
    event-loop lag p99 above LOOP_LAG_MS is a note where stamps are user-space (with kernel
    receive stamps it moves none; the schedule-lag check covers late sends).
    """
    meta = RunMeta.read(meta)
    mode = meta.mode
    server = m.open_loop(mode)
    resolved, slo_error = resolve_slo_lenient(meta.slo)
    slo = Slo.read(resolved)
    q = float(slo.percentile)
    recs = m.measured(records)
    done = m.completed(recs)
    checks: list[dict] = []
    reasons: list[str] = []
    notes: list[str] = []

    if slo_error:
        _check(checks, reasons, "slo_preset", False, slo.preset, None, slo_error)
    _check(checks, reasons, "completed", bool(done), len(done), ">0",
           "no measured request completed")
    _check(checks, reasons, "not_interrupted", not meta.interrupted,
           bool(meta.interrupted), False, "the run was interrupted")
    nf, nc = len(m.failed(recs)), len(m.cancelled(recs))
    _check(checks, reasons, "no_failures", nf == 0, nf, 0,
           f"{nf} measured request(s) failed (rule: any failure makes the run INVALID)")
    _check(checks, reasons, "no_cancelled", nc == 0, nc, 0,
           f"{nc} measured request(s) were cancelled before they ended")
    workers = (meta.locust or {}).get("worker_status") or {}     # the Locust engine's block
    lost = {k: v for k, v in workers.items()
            if v in ("dead", "never_ready")}            # a Locust worker lost (issue 32)
    if lost:
        _check(checks, reasons, "workers_lost", False, sorted(lost), [],
               "Locust worker(s) lost mid-run: " + ", ".join(
                   f"worker {k} {v.replace('_', ' ')}" for k, v in sorted(lost.items()))
               + " (their unfinished requests are cancelled, naming the worker)")

    dur = m.duration_s(m.window(records))
    min_dur = float(meta.min_duration_s or 0.0)
    _check(checks, reasons, "min_duration_s", dur is not None and dur >= min_dur, dur, min_dur,
           f"duration {_fmt(dur)} s < min_duration_s {min_dur}" if dur is not None else
           f"no measured window (no measured request was sent and ended), so no duration to "
           f"hold against min_duration_s {min_dur:g}")
    min_q = int(meta.min_queries or 0)
    _check(checks, reasons, "min_queries", len(done) >= min_q, len(done), min_q,
           f"{len(done)} completed requests < min_queries {min_q}")

    arrays = m.latency_series(records)      # the summary's arrays (analysis.contract.timing)
    sched = "_from_scheduled_ms" if server else "_ms"
    series = {"ttft_ms": arrays["ttft" + sched], "tpot_ms": arrays["tpot_ms"],
              "itl_ms": arrays["itl_ms"], "e2el_ms": arrays["e2el" + sched]}
    label = {"ttft_ms": "TTFT" + (" from scheduled" if server else ""), "tpot_ms": "TPOT",
             "itl_ms": "ITL", "e2el_ms": "E2E" + (" from scheduled" if server else "")}
    for key in LIMIT_KEYS:
        limit = getattr(slo, key)                     # LIMIT_KEYS: named fields of Slo
        if limit is None:
            continue
        v = m.percentile(series[key], q)
        ok = v is not None and v <= limit
        if v is not None:
            why = f"p{q:g} {label[key]} {_fmt(v)} ms > {limit} ms"
        elif key in STREAM_ONLY and not streamed(meta):
            why = f"p{q:g} {label[key]} (limit {limit:g} ms): {not_streamed_why([key])}"
        else:
            why = (f"p{q:g} {label[key]}: no data: "
                   + (NO_DATA[key] if done else "no measured request completed"))
        _check(checks, reasons, f"p{q:g}_{key}", ok, v, limit, why)

    if server:
        sent = m.stamp_rate(records, "sent_at_ns")      # of the measured records (arrays)
        sched = m.stamp_rate(records, "scheduled_at_ns") or meta.scheduled_rate
        frac = float(slo.min_rate_fraction)
        ok = sent is not None and sched is not None and sent >= frac * sched
        _check(checks, reasons, "send_rate", ok, sent,
               None if sched is None else frac * sched,
               f"achieved send rate {_fmt(sent)}/s < {frac} × scheduled {_fmt(sched)}/s"
               if sent is not None and sched is not None else
               "send rate not checked: " + ("fewer than two measured sends at distinct times"
                                            if sent is None else "no scheduled rate is known"))
        tab, meas, _, _ = m.selections(records)
        lag = m.percentile(timing.per_record(tab)["schedule_lag_ms"][meas], 99)
        lim = float(slo.max_schedule_lag_ms)
        _check(checks, reasons, "p99_schedule_lag_ms", lag is not None and lag <= lim, lag, lim,
               f"p99 schedule lag {_fmt(lag)} ms > {lim} ms: requests were sent later than "
               f"scheduled, so the offered load was not the scheduled one; "
               f"{lag_cause(meta, records, lim)}"
               if lag is not None else "p99 schedule lag: no data (no measured request was "
               "both scheduled and sent)")
        cpu = client_cpu(meta)
        if cpu is None:
            notes.append("client CPU not recorded: saturation not checked")
        else:
            _check(checks, reasons, "client_cpu", cpu < CPU_SATURATION, cpu, CPU_SATURATION,
                   f"client CPU {cpu:.2f} of a core ≥ {CPU_SATURATION}: the client may be the "
                   "bottleneck")
        loop = meta.client_load.loop_lag_ms_p99 if meta.client_load else None
        kernel = bool(meta.client_transport) and meta.client_transport.stamp_source == "kernel"
        if loop is not None and loop > LOOP_LAG_MS and not kernel:  # kernel stamps: lag moves none
            notes.append(f"client event-loop lag p99 {loop:.1f} ms > {LOOP_LAG_MS} ms: arrival "
                         "stamps may be late (see summary.client)")
    else:
        notes.append(f"mode {mode}: no schedule checks (they apply to server runs)")
    return {"valid": not reasons, "reasons": reasons, "checks": checks, "notes": notes,
            "percentile": q}


def with_run_end(v: dict, end: dict) -> dict:
    """The verdict with the run-end check (analysis.metrics.run_end): INVALID, with the reason,
    when the run did not end cleanly (no meta.json, or planned requests without a record);
    ``requests_without_record`` states the count (None: the plan had no fixed count)."""
    checks, reasons = list(v["checks"]), list(v["reasons"])
    if not end["meta_json"]:     # nothing says whether it was interrupted: it cannot pass
        checks = [{**c, "ok": False, "value": "unknown: no meta.json"}
                  if c["name"] == "not_interrupted" else c for c in checks]
    _check(checks, reasons, "ended_cleanly", end["ended_cleanly"], end["without_record"], 0,
           f"the run did not end cleanly: {end['reason']}")
    return {**v, "valid": not reasons, "reasons": reasons, "checks": checks, "run_end": end,
            "requests_without_record": end["without_record"]}
