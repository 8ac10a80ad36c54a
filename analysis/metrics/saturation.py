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

Several sender processes (meta ``client_processes``, loadgen.run.procs; each record's
``worker`` is its process): every rule is judged per process on that process's records and
load (a full loop is one process's core, not the sum), and a reason names its ``process``;
the run-wide figures stay for display (``cpu_fraction``: the busiest process).

Pure: no I/O. ``analysis.metrics.summary.client_block`` puts the result into ``summary.client``.
"""
from __future__ import annotations

from typing import Optional

from analysis.metrics import metrics as m
from analysis.metrics import slo as slo_mod

CPU_FRACTION = slo_mod.CPU_SATURATION      # share of one core over the run
LOOP_LAG_MS = slo_mod.LOOP_LAG_MS          # p99 event-loop lag, user-space stamps only
COALESCED_SHARE = 0.05                     # reads with > 1 token chunk / reads with any
SCHEDULE_LAG_MS = 10.0                     # default when the SLO gives no max_schedule_lag_ms
USER_STAMPS = ("user", "mixed")


def user_space_stamps(meta: dict) -> bool:
    """Does a late event loop move the stamps? True for user-space stamps (aiohttp, Locust, a
    ``mixed`` wire run) and for runs that did not record how they stamped (older runs)."""
    tr = meta.get("client_transport") or {}
    src = tr.get("stamp_source")
    return src in USER_STAMPS or tr.get("transport") == "aiohttp" or src is None


def coalesced_share(records: list[dict]) -> tuple[Optional[int], Optional[float]]:
    """(coalesced reads, their share of the reads that carried a token chunk) over the measured
    records that counted them (wire transport); (None, None) where none did."""
    counted = [r for r in m.measured(records) if r.get("coalesced_reads") is not None]
    if not counted:
        return None, None
    coalesced = sum(r["coalesced_reads"] for r in counted)
    token_reads = sum(len({c[0] for c in r.get("chunks") or () if c[1]}) for r in counted)
    return coalesced, (coalesced / token_reads if token_reads else None)


def figures(records: list[dict], meta: dict) -> dict:
    """The figures the rules read; None where the run did not record one."""
    recs = m.measured(records)
    offline = meta.get("mode") == "offline"
    return {"schedule_lag_ms_p99": None if offline else m.percentile(
                (m.schedule_lag_ms(r) for r in recs), 99),
            "cpu_fraction": slo_mod.client_cpu(meta),
            "coalesced_reads_share": coalesced_share(records)[1],
            "loop_lag_ms_p99": (meta.get("client_load") or {}).get("loop_lag_ms_p99"),
            "user_space_stamps": user_space_stamps(meta)}


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


def per_process(records: list[dict], meta: dict, lim: dict) -> Optional[list[dict]]:
    """[{"process", "figures", "reasons"}] for each of meta's ``client_processes``; None for a
    one-process run. A process's records are those whose ``worker`` is its index."""
    procs = meta.get("client_processes")
    if not procs:
        return None
    out = []
    for p in procs:
        k = p.get("index")
        mine = [r for r in records if r.get("worker") == str(k)]
        pmeta = dict(meta, client_cpu=p.get("cpu_util"),
                     client_load={"loop_lag_ms_p99": p.get("loop_lag_ms_p99")})
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


def saturation(records: list[dict], meta: dict, slo: Optional[dict]) -> dict:
    """{"saturated", "reasons", "warnings", "figures", "limits"} of one run (module docstring);
    with several sender processes also "processes" (each one's figures and reasons)."""
    meta = meta or {}
    fig, lim = figures(records, meta), limits(slo)
    procs = per_process(records, meta, lim)
    reasons = judge(fig, lim) if procs is None else [r for p in procs for r in p["reasons"]]
    out = {"saturated": bool(reasons), "reasons": reasons,
           "warnings": [warning(r) for r in reasons], "figures": fig, "limits": lim}
    if procs is not None:
        out["processes"] = procs
    return out
