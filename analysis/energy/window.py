"""The summary's "energy" object: window energy, J/token, J/request, above-idle, per-request split.

    power.jsonl rows ─► series per (source, device) ─► energy_series (counter or trapezoid) ─┐
    marks (measure_start/end, idle_start/end) ─► window, idle window                         ├► energy_summary
    records (chunks) ─► output tokens in the window; mean output length ─────────────────────┤
    energy_split ─► per-request J (prefill / decode), summing to the window total ───────────┘

Method (ML.ENERGY's): J/token = window energy / output tokens produced in the window; J/request =
J/token x mean output length, which avoids dividing by requests completed in a short window. Gross
energy is the headline; ``above_idle`` (gross minus idle power x duration) is labelled separately.
Total = GPU + CPU package + DRAM; core/uncore (inside the package) and psys are listed, not added.
Estimated sources are reported under ``estimated`` and never added into measured totals.
Each power.jsonl row is read as contract/power.py PowerRow (a misspelt key is an AttributeError).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from analysis.contract.power import PowerRow, PowerSource
from analysis.contract.rundir import read_power, read_power_sources
from analysis.energy import series as es
from analysis.energy.split import distribution, split_energy, token_events
from analysis.contract.records import Records, as_records

TOTAL_SCOPES = ("gpu", "cpu_package", "dram")
MIN_WINDOW_S = 60.0
METHOD = ("window energy / output tokens produced in the window = J/token; "
          "J/request = J/token x mean output length (ML.ENERGY)")


def load_power(run_dir: str | Path) -> tuple[list[dict], list[dict]]:
    """power.jsonl rows and the sources' descriptions (power_sources.json) of a run directory."""
    return read_power(run_dir), read_power_sources(run_dir)   # through analysis.contract


def _series(rows: list[dict | PowerRow]) -> tuple[dict, dict]:
    series: dict = {}
    marks: dict = {}
    for r in map(PowerRow.read, rows):
        if r.kind == "mark":
            marks.setdefault(r.value, int(r.t_ns))
            continue
        if r.kind not in ("energy_j", "power_w") or r.value is None:
            continue
        s = series.setdefault((r.source, r.device), {
            "scope": r.scope, "energy": [], "power": [], "wrap_j": None})
        if r.kind == "energy_j":
            s["energy"].append((int(r.t_ns), float(r.value)))
            s["wrap_j"] = r.wrap_j or s["wrap_j"]
        else:
            s["power"].append((int(r.t_ns), float(r.value)))
    return series, marks


def _cum(s: dict) -> tuple[Optional[es.Unwrapped], Optional[es.Unwrapped], list[str]]:
    """(counter, power) cumulative series and notes."""
    notes = []
    counter = power = None
    if len(s["energy"]) >= 2:
        t, v = zip(*s["energy"])
        counter = es.unwrap_counter(t, v, s["wrap_j"])
        if counter.resets:
            notes.append(f"{len(counter.resets)} counter reset(s): energy is a lower bound")
        if counter.wraps:
            notes.append(f"{len(counter.wraps)} counter wraparound(s) handled")
    if len(s["power"]) >= 2:
        t, w = zip(*s["power"])
        power = es.cumulative_trapezoid(t, w)
    return counter, power, notes


def _series_figures(key, s, start, end, idle, evidence) -> dict:
    counter, power, notes = _cum(s)
    main = counter if counter is not None else power
    method = "counter" if counter is not None else "integrated_power"
    out = {"source": key[0], "device": key[1], "scope": s["scope"], "evidence": evidence,
           "method": f"estimate ({method})" if evidence == "estimated" else method,
           "energy_j": None, "avg_power_w": None, "idle_power_w": None, "notes": notes,
           "samples": len(s["energy"]) or len(s["power"]),
           "sample_interval_s": es.median_interval_s([t for t, _ in (s["energy"] or s["power"])])}
    if main is None:
        out["reason"] = "fewer than two samples"
        return out
    e = es.window_energy(main, start, end)
    if e is None:
        out["reason"] = "samples do not bracket the window"
        return out
    out["energy_j"] = e
    out["avg_power_w"] = e / ((end - start) / 1e9)
    if idle:
        out["idle_power_w"] = es.mean_power_w(main, *idle)
    out["_cum"] = (counter, power)
    return out


def _grid_cum(items: list[dict], start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid of sample times in [start, end] and the summed cumulative energy at each (from start).
    A counter series takes its shape from its own instant power when it has one."""
    pts = {start, end}
    for it in items:
        for u in it["_cum"]:
            if u is not None:
                pts.update(int(t) for t in u.t_ns if start < t < end)
    grid = np.array(sorted(pts), dtype=np.int64)
    total = np.zeros(len(grid))
    for it in items:
        counter, power = it["_cum"]
        c = None
        if power is not None and es.covers(power.t_ns, start, end):
            c = es.cum_at(power, grid)
            c = c - c[0]
            if counter is not None:                     # shape from power, total from the counter
                c = c * (it["energy_j"] / c[-1]) if c[-1] > 0 else None
        if c is None:
            c = es.cum_at(counter, grid)
            c = c - c[0]
        total += c
    return grid, total


def _headline(energy: float, start: int, end: int, tokens: float, mean_out: Optional[float]) -> dict:
    dur = (end - start) / 1e9
    jpt = energy / tokens if tokens > 0 else None
    return {"energy_j": energy, "avg_power_w": energy / dur,
            "j_per_output_token": jpt,
            "output_tokens_per_j": tokens / energy if energy > 0 and tokens > 0 else None,
            "j_per_request": jpt * mean_out if jpt is not None and mean_out else None}


def _window(window, marks, records) -> tuple[Optional[tuple[int, int]], str]:
    if window is not None:
        return (int(window[0]), int(window[1])), "given"
    if "measure_start" in marks and "measure_end" in marks:
        return (marks["measure_start"], marks["measure_end"]), "marks"
    meas = [r for r in records if (r.phase or "measured") == "measured"
            and r.sent_at_ns is not None and r.end_at_ns is not None]
    if meas:
        return (min(r.sent_at_ns for r in meas), max(r.end_at_ns for r in meas)), "records"
    return None, "none"


def _unmeasured(reason: str, sources: list[dict], warnings: list[str], **extra) -> dict:
    return {"status": "unmeasured", "evidence": "unmeasured", "reason": reason, "window": None,
            "unmeasured_parts": [],
            "output_tokens": None, "mean_output_tokens": None, "energy_j": None,
            "avg_power_w": None, "j_per_output_token": None, "output_tokens_per_j": None,
            "j_per_request": None, "by_scope": {}, "above_idle": None, "per_request": None,
            "estimated": None, "series": [], "method": METHOD, "sources": sources,
            "warnings": warnings, **extra}


def energy_summary(power_rows: list[dict], records: Records,
                   window: Optional[tuple[int, int]], sources: list[dict]) -> dict:
    """The summary's "energy" object; see the module docstring and docs/energy.md."""
    records = as_records(records)
    typed = [PowerSource.of(s) for s in sources]
    warnings = [f"{s.name}: {w}" for s in typed for w in s.warnings]
    live = [s for s in typed if s.name != "none"]
    if not live and not any(PowerRow.read(r).kind in ("energy_j", "power_w") for r in power_rows):
        return _unmeasured("no power source configured (power.sources: [none])", sources, warnings)
    series, marks = _series(power_rows)
    win, win_from = _window(window, marks, records)
    if win is None or win[1] <= win[0]:
        return _unmeasured("no measurement window (no marks and no measured records)",
                           sources, warnings)
    start, end = win
    dur = (end - start) / 1e9
    idle = (marks["idle_start"], marks["idle_end"]) if {"idle_start", "idle_end"} <= marks.keys() \
        else None
    est_names = {s.name for s in typed if s.evidence == "estimated"} | {"estimate"}
    figs = [_series_figures(k, s, start, end, idle,
                            "estimated" if k[0] in est_names else "measured")
            for k, s in sorted(series.items(), key=lambda kv: (kv[0][0], str(kv[0][1])))]
    for f in figs:
        f["included_in_total"] = f["energy_j"] is not None and f["scope"] in TOTAL_SCOPES
    meas = [f for f in figs if f["included_in_total"] and f["evidence"] == "measured"]
    est = [f for f in figs if f["energy_j"] is not None and f["evidence"] == "estimated"
           and f["scope"] in TOTAL_SCOPES + ("system",)]

    tokens = float(sum(n for r in records for t, n in token_events(r) if start < t <= end))
    outs = [r.output_tokens for r in records if (r.phase or "measured") == "measured"
            and r.status == "ok" and r.output_tokens is not None]
    mean_out = float(np.mean(outs)) if outs else None
    if any(f["method"] == "counter" for f in meas) and dur < MIN_WINDOW_S:
        warnings.append(f"window {dur:.1f} s < {MIN_WINDOW_S:.0f} s: counters update about every"
                        " 100 ms, so edge error is a larger share; prefer >= 60 s")
    missing = [f"{s.name}: {s.status or 'not described'}" + (f": {s.reason}" if s.reason else "")
               for s in live if s.status != "ok"]
    missing += [f"{f['source']}/{f['device']}: {f['reason']}" for f in figs if f["energy_j"] is None]
    base = {"window": {"start_ns": start, "end_ns": end, "duration_s": dur, "from": win_from},
            "unmeasured_parts": missing,
            "output_tokens": tokens, "mean_output_tokens": mean_out, "method": METHOD,
            "sources": sources, "warnings": warnings,
            "series": [{k: v for k, v in f.items() if k != "_cum"} for f in figs]}
    estimated = None
    if est:
        e = sum(f["energy_j"] for f in est)
        estimated = {"evidence": "estimated", **_headline(e, start, end, tokens, mean_out),
                     "methods": sorted({s.method or "?" for s in typed
                                        if s.evidence == "estimated"})}
    if not meas:
        why = "; ".join(missing) or "no measured energy in the window"
        if estimated:
            head = {k: estimated[k] for k in ("energy_j", "avg_power_w", "j_per_output_token",
                                              "output_tokens_per_j", "j_per_request")}
            return {"status": "estimated", "evidence": "estimated",
                    "reason": f"no measured source ({why})", **base, **head,
                    "estimated": estimated, "by_scope": {}, "above_idle": None, "per_request": None}
        return _unmeasured(why, sources, warnings, **{k: v for k, v in base.items()
                                                      if k not in ("sources", "warnings", "method")})
    energy = sum(f["energy_j"] for f in meas)
    by_scope = {}
    for scope in TOTAL_SCOPES + ("cpu_core", "cpu_uncore", "platform"):
        fs = [f for f in figs if f["scope"] == scope and f["evidence"] == "measured"
              and f["energy_j"] is not None]
        if fs:
            e = sum(f["energy_j"] for f in fs)
            by_scope[scope] = {"energy_j": e, "avg_power_w": e / dur, "devices": len(fs),
                               "j_per_output_token": e / tokens if tokens > 0 else None,
                               "in_total": scope in TOTAL_SCOPES}
    grid, cum = _grid_cum(meas, start, end)
    split = split_energy(grid, np.diff(cum), records)
    per_request = {"method": "each interval's energy split across requests in flight by tokens "
                             "in the interval (time in flight where none); prefill = share up to "
                             "and including the first token", "intervals": len(grid) - 1,
                   **distribution(records, split, start, end)}
    return {"status": "measured", "evidence": "measured", "reason": None, **base,
            **_headline(energy, start, end, tokens, mean_out), "by_scope": by_scope,
            "above_idle": _above_idle(meas, idle, energy, start, end, tokens, mean_out),
            "per_request": per_request, "estimated": estimated}


def _above_idle(meas, idle, energy, start, end, tokens, mean_out) -> dict:
    if idle is None:
        return {"status": "unmeasured", "reason": "no idle baseline (power.idle_baseline_s = 0)"}
    if any(f["idle_power_w"] is None for f in meas):
        return {"status": "unmeasured", "reason": "idle window not covered by every source"}
    idle_w = sum(f["idle_power_w"] for f in meas)
    above = energy - idle_w * (end - start) / 1e9
    return {"status": "measured", "label": "above idle (gross minus idle power x duration); "
            "not the headline", "idle_power_w": idle_w, "idle_window_s": (idle[1] - idle[0]) / 1e9,
            **_headline(above, start, end, tokens, mean_out)}
