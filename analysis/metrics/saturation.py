"""Client saturation: did the client change what was measured? One rule per way it can.

    measured records + meta (mode, client_cpu, client_load, client_transport) + SLO limits
        ─► figures(records, meta)   the four figures the rules read (None where unrecorded)
        ─► judge(figures, limits)   ─► [{"rule", "value", "limit"}] for every rule that fired
        ─► saturation(...)          ─► {"saturated", "reasons", "warnings", "figures", "limits"}

The rules (each reason names its figure and limit):

* ``schedule_lag_ms_p99`` > ``slo.max_schedule_lag_ms`` (default 10 ms): the client sent late
  against its schedule (or its in-flight cap held requests back). Not in offline mode, where every
  request is scheduled at t0 and waits for a slot by design.
* ``cpu_fraction`` ≥ ``CPU_FRACTION`` (0.9 of one core, the verdict's own limit): the loop that
  sends and reads is nearly full, so sends and reads queue behind each other.
* ``coalesced_reads_share`` > ``COALESCED_SHARE`` (wire transport): reads carrying more than one
  token chunk; every chunk of such a read but the last got the read's later stamp, so ITL moves.
* ``loop_lag_ms_p99`` > ``LOOP_LAG_MS`` (5 ms), only where stamps are taken in user space
  (``stamp_source`` user or mixed, the aiohttp transport, or a run that did not record it):
  there a late loop is a late stamp. With kernel receive stamps a late loop moves no stamp
  (late sends are the schedule-lag rule's), so it is reported as a figure, never a reason.

The in-flight cap is neither (analysis.metrics.late_sends): when at least half the late sends
were due while the cap's worth of requests was already in flight, they waited for a free slot by
the scenario's own rule; the schedule-lag rule is then not a saturation reason and its warning
names the cap (``in_flight_cap``: late, held, cap). The host is not the client. meta ``host_load`` (the runner's reading of the whole host over the
measured phase: loadavg, CPUs' worth of *other* processes' work, steal; busy by the rules of
analysis.roofline.host_load; the managed server under test, target.server, counted apart as
``server_cpus``, never as another process) tells a busy host from a saturated client. When the schedule-lag
rule fires while the host was busy and the client's own CPU stayed under ``CPU_FRACTION``, the
late sends are the host's doing: that rule is not a saturation reason then (``saturated`` stays
false) but ``host`` {"busy": true, "reasons", "explains": ["schedule_lag_ms_p99"], figures} and a
warning with the evidence. (Whether late sends invalidate the run is the verdict's rule, whatever
their cause: analysis.metrics.slo; its reason names the cause with ``lag_cause``.) A busy host
without late sends is a warning only.

Several sender processes (meta ``client_processes``, loadgen.engine.procs; each record's
``worker`` is its process): every rule is judged per process on that process's records and
load (a full loop is one process's core, not the sum), and a reason names its ``process``;
the run-wide figures stay for display (``cpu_fraction``: the busiest process).

Pure: no I/O. ``analysis.metrics.summary.client_block`` puts the result into ``summary.client``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract import timing
from analysis.contract.meta import ClientLoad, ClientTransport, HostLoad, RunMeta
from analysis.metrics import client_load
from analysis.metrics import figures as m
from analysis.metrics import late_sends
from analysis.contract.records import Records, as_records

CPU_FRACTION = client_load.CPU_SATURATION  # share of one core over the run
LOOP_LAG_MS = client_load.LOOP_LAG_MS      # p99 event-loop lag, user-space stamps only
COALESCED_SHARE = 0.05                     # reads with > 1 token chunk / reads with any
SCHEDULE_LAG_MS = 10.0                     # default when the SLO gives no max_schedule_lag_ms
USER_STAMPS = ("user", "mixed")


def user_space_stamps(meta: RunMeta) -> bool:
    """Does a late event loop move the stamps? True for user-space stamps (aiohttp, Locust, a
    ``mixed`` wire run) and for runs that did not record how they stamped (older runs)."""
    tr = meta.client_transport or ClientTransport()
    src = tr.stamp_source
    return src in USER_STAMPS or tr.transport == "aiohttp" or src is None


def coalesced_share(records: Records) -> tuple[Optional[int], Optional[float]]:
    """(coalesced reads, their share of the reads that carried a token chunk) over the measured
    records that counted them (wire transport); (None, None) where none did."""
    tab, meas, _, _ = m.selections(records)
    hit = tab.__dict__.get("_coalesced")
    if hit is not None and hit[0] is records:       # the summary and the verdict: once
        return hit[1]
    col = tab.column("coalesced_reads")
    counted = meas & ~np.equal(col, None)
    if not counted.any():
        out = None, None
    else:
        coalesced = sum(col[counted].tolist())
        reads = timing.token_reads(tab if counted.all() else tab.select(counted))  # arrays
        out = coalesced, (coalesced / reads if reads else None)
    tab._coalesced = (records, out)
    return out


def _loop_lag(meta: RunMeta) -> Optional[float]:
    return meta.client_load.loop_lag_ms_p99 if meta.client_load else None


def figures(records: Records, meta: RunMeta) -> dict:
    """The figures the rules read; None where the run did not record one."""
    offline = meta.mode == "offline"
    return {"schedule_lag_ms_p99": None if offline else _lag_p99(records),
            "cpu_fraction": client_load.client_cpu(meta),
            "coalesced_reads_share": coalesced_share(records)[1],
            "loop_lag_ms_p99": _loop_lag(meta),
            "user_space_stamps": user_space_stamps(meta)}


def _lag_p99(records: list) -> Optional[float]:
    """p99 of the measured records' schedule lag (timing.schedule_lag_ms, on arrays)."""
    tab, meas, _, _ = m.selections(records)
    return m.percentile(timing.per_record(tab)["schedule_lag_ms"][meas], 99)


def limits(slo: Optional[dict]) -> dict:
    lag = (slo or {}).get("max_schedule_lag_ms")
    return {"schedule_lag_ms_p99": float(lag) if lag is not None else SCHEDULE_LAG_MS,
            "cpu_fraction": CPU_FRACTION, "coalesced_reads_share": COALESCED_SHARE,
            "loop_lag_ms_p99": LOOP_LAG_MS}


def judge(fig: dict, lim: dict) -> list[dict]:
    """[{"rule", "value", "limit"}] for every rule that fired, in the order of the docstring."""
    out = []

    def fire(rule: str, above_or_equal: bool = False) -> None:
        v, limit = fig.get(rule), lim[rule]
        if v is not None and (v >= limit if above_or_equal else v > limit):
            out.append({"rule": rule, "value": float(v), "limit": float(limit)})
    fire("schedule_lag_ms_p99")
    fire("cpu_fraction", above_or_equal=True)
    fire("coalesced_reads_share")
    if fig.get("user_space_stamps"):
        fire("loop_lag_ms_p99")
    return out


_TEXT = {
    "schedule_lag_ms_p99": "schedule lag p99 {v:.1f} ms > {l:g} ms: the client (or its in-flight "
                           "cap) sent late against the schedule; read the from-scheduled figures",
    "cpu_fraction": "client process used {v:.0%} of a core (≥ {l:.0%}): sends and reads queue in "
                    "the client; latencies may include client queueing, not only the server's",
    "coalesced_reads_share": "{v:.1%} of token reads carried more than one chunk (> {l:.0%}): the "
                             "client read late, those chunks share one stamp and ITL is skewed",
    "loop_lag_ms_p99": "client event-loop lag p99 {v:.1f} ms (> {l:g} ms) with user-space stamps: "
                       "arrivals were stamped late; latencies may be inflated by the client",
}


def host(meta: dict | RunMeta) -> Optional[HostLoad]:
    """meta ``host_load`` (the measured phase's host load, as the runner recorded it), or None
    when the run did not record it."""
    h = RunMeta.read(meta).host_load
    return h if h is not None and h.busy is not None else None


def _host_evidence(h: HostLoad) -> str:
    parts = []
    server = h.server_cpus
    if server is not None:          # the managed server is the system under test: apart
        parts.append(f"the managed server used {server:.1f} CPUs")
    if h.other_cpus is not None and h.ncpu:
        parts.append(f"other processes {h.other_cpus:.1f} of {h.ncpu} CPUs"
                     if server is not None else
                     f"other processes used {h.other_cpus:.1f} of {h.ncpu} CPUs")
    if h.steal_fraction is not None:
        parts.append(f"steal {h.steal_fraction:.0%}")
    if h.loadavg_1m is not None:
        parts.append(f"load average {h.loadavg_1m:.1f}")
    return ", ".join(parts) or "no figures"


def lag_cause(meta: dict | RunMeta, records=None, limit_ms: Optional[float] = None) -> str:
    """Why sends were late, in words, from what the run recorded: the in-flight cap when the
    records show it held the late sends (analysis.metrics.late_sends; ``records`` given), the
    client's own CPU against ``CPU_FRACTION``, the host's load (meta ``host_load``: other
    processes, the managed server counted apart), else what is not known."""
    meta = RunMeta.read(meta)
    if records is not None:
        c = late_sends.held_by_cap(records, meta, SCHEDULE_LAG_MS if limit_ms is None
                                   else limit_ms)
        if c is not None and c["explains"]:
            return late_sends.cap_text(c)
    cpu, h = client_load.client_cpu(meta), host(meta)
    if cpu is not None and cpu >= CPU_FRACTION:
        return f"the client was saturated (its CPU {cpu:.0%} of a core)"
    mine = f"the client used {cpu:.1%} of a core" if cpu is not None else \
        "the client's CPU was not recorded"
    if h is not None and h.busy:
        return (f"the host was busy with other work ({_host_evidence(h)}) while {mine}: the "
                "host, not loadgen's own load, delayed the sends; rerun on a quieter host (or "
                "give the server its own CPUs: target.server.cpus)")
    if h is not None:
        lag = _loop_lag(meta)
        loop = f", event-loop lag p99 {lag:.1f} ms" if lag is not None else ""
        return (f"{mine} and the host was not busy ({_host_evidence(h)}{loop}): the client's "
                "event loop held sends back")
    return f"{mine}; the host's load was not recorded"


def _host_block(h: Optional[HostLoad], moved: list[dict]) -> Optional[dict]:
    if h is None:
        return None
    return {**h.as_dict(), "explains": [r["rule"] for r in moved], "evidence": _host_evidence(h)}


def _host_warning(h: HostLoad, moved: list[dict], meta: RunMeta) -> str:
    text = f"host busy during the run: {_host_evidence(h)}"
    for r in moved:
        text += (f"; schedule lag p99 {r['value']:.1f} ms > {r['limit']:g} ms: "
                 + lag_cause(meta))
    return text


def _cap_warning(c: dict, moved: list[dict]) -> str:
    r = moved[0]
    return (f"schedule lag p99 {r['value']:.1f} ms > {r['limit']:g} ms: "
            + late_sends.cap_text(c))


def per_process(records: Records, meta: RunMeta, lim: dict) -> Optional[list[dict]]:
    """[{"process", "figures", "reasons"}] for each of meta's ``client_processes``; None for a
    one-process run. A process's records are those whose ``worker`` is its index."""
    records = as_records(records)
    procs = meta.client_processes
    if not procs:
        return None
    out = []
    for p in procs:
        k = p.index
        mine = [r for r in records if r.worker == str(k)]
        pmeta = meta.model_copy(update={"client_cpu": p.cpu_util, "client_load": ClientLoad(
            loop_lag_ms_p99=p.loop_lag_ms_p99)})
        fig = figures(mine, pmeta)
        reasons = [dict(r, process=k) for r in judge(fig, lim)]
        out.append({"process": k, "figures": fig, "reasons": reasons})
    return out


def warning(reason: dict) -> str:
    """One line of text for a reason (naming its process when the run had several)."""
    text = _TEXT[reason["rule"]].format(v=reason["value"], l=reason["limit"])
    if reason.get("process") is not None:
        text = f"client process {reason['process']}: " + text
    return text


def saturation(records: Records, meta: dict | RunMeta, slo: Optional[dict]) -> dict:
    """{"saturated", "reasons", "warnings", "figures", "limits"} of one run (module docstring);
    with several sender processes also "processes" (each one's figures and reasons)."""
    meta = RunMeta.read(meta)
    fig, lim = figures(records, meta), limits(slo)
    procs = per_process(records, meta, lim)
    reasons = judge(fig, lim) if procs is None else [r for p in procs for r in p["reasons"]]
    h, moved, by_cap = host(meta), [], []
    cap = late_sends.held_by_cap(records, meta, lim["schedule_lag_ms_p99"])
    lagged = [r for r in reasons if r["rule"] == "schedule_lag_ms_p99"]
    if cap is not None and cap["explains"] and lagged:   # the cap held them: a known cause
        by_cap, reasons = lagged, [r for r in reasons if r["rule"] != "schedule_lag_ms_p99"]
    elif h is not None and h.busy and not any(r["rule"] == "cpu_fraction" for r in reasons):
        moved = lagged                                   # the host's doing
        reasons = [r for r in reasons if r["rule"] != "schedule_lag_ms_p99"]
    warnings = [warning(r) + (f" ({lag_cause(meta)})" if r["rule"] == "schedule_lag_ms_p99"
                              and procs is None else "") for r in reasons]
    if by_cap:
        warnings.insert(0, _cap_warning(cap, by_cap))
    if h is not None and h.busy:
        warnings.insert(0, _host_warning(h, moved, meta))
    out = {"saturated": bool(reasons), "reasons": reasons, "warnings": warnings,
           "figures": fig, "limits": lim, "host": _host_block(h, moved),
           "in_flight_cap": ({**cap, "explains_rules": [r["rule"] for r in by_cap]}
                             if cap is not None else None)}
    if procs is not None:
        out["processes"] = procs
    return out
