"""The comparison conditions beside the numbers, and the roofline relation, for the report.

    summary + meta + sut.json (+ records) ─► conditions_table ─► 11 rows (item, value, evidence),
        one helper a row where it takes more than a line; what sut.json says comes from sut.py
    sut.json "model" shape + device spec   ─► roofline_section ─► measured TPOT/TTFT vs the floors

A figure is never guessed: a missing one reads ``not recorded`` / ``unmeasured`` with the reason.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

from analysis.metrics import metrics as m
from analysis.report.sut import (launch_description, model_shape, precision, server_info,
                                 server_software)

NO_INFO = "not recorded: the server published no /info"


def _mean(values) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _or(value: Any, missing: str) -> str:
    return missing if value in (None, "", [], {}) else str(value)


def _versions(meta: dict, sut: dict, info: dict) -> tuple[str, str]:
    """(the software versions row, its evidence)."""
    server, sources = server_software(sut, info)
    host = sut.get("client_host") or {}
    client = {"loadgen": meta.get("loadgen_version"), "python": host.get("python")}
    client.update({k: v for k, v in (host.get("packages") or {}).items() if v})
    client = {k: v for k, v in client.items() if v}
    parts = []
    if server:
        parts.append("server: " + ", ".join(f"{k} {v}" for k, v in server.items()))
    if client:
        parts.append("client: " + ", ".join(f"{k} {v}" for k, v in client.items()))
        sources.append("client package metadata")
    return "; ".join(parts), ("recorded (" + "; ".join(sources) + ")" if sources else "recorded")


def _task(summary: dict, meta: dict, sut: dict, info: dict, records: list[dict]) -> str:
    done = m.completed(m.measured(records))
    name = meta.get("model") or sut.get("model") or info.get("preset")
    p_in = _mean(r.get("prompt_tokens") for r in done)
    p_out = _mean(r.get("output_tokens") for r in done)
    lens = ("token lengths not recorded (no completed requests)" if p_in is None else
            f"mean prompt {p_in:.1f} tokens, mean output "
            f"{'n/a' if p_out is None else f'{p_out:.1f}'} tokens (measured)")
    wl = meta.get("workload") or {}
    wl_txt = (f"; workload {wl.get('source')} (tokenizer {wl.get('tokenizer')}, counts "
              f"{wl.get('token_count')})" if wl else "")
    endpoint = meta.get("endpoint") or sut.get("endpoint")
    return (f"model {_or(name, 'not recorded')}; {_or(endpoint, 'endpoint not recorded')} API; "
            f"mode {summary.get('mode')}; {lens}{wl_txt}")


def _batch(meta: dict, info: dict, flags: dict, records: list[dict]) -> str:
    slots = info.get("slots")
    if slots is None and flags.get("max-num-seqs") is not None:
        slots = f"{flags['max-num-seqs']} (--max-num-seqs)"
    peak = max((n for _, n in m.in_flight(m.measured(records))), default=None)
    cap = meta.get("in_flight_cap")
    return (f"server slots {_or(slots, 'not recorded')}; client in-flight cap "
            f"{_or(cap, 'none (open loop)')}; peak in flight {_or(peak, 'n/a')} (measured)")


def _device(info: dict, sut: dict) -> tuple[str, Optional[str], str]:
    """(the device unit row, the device's name or None, its evidence): the server's /info, else
    the host's GPU inventory taken when loadgen launched the server."""
    dev = info.get("device_kind") or info.get("device")
    device = (f"{dev} x{info.get('device_count', '?')} (backend {info.get('backend')})" if dev
              else NO_INFO)
    dev_evidence = "recorded (server)" if dev else "unmeasured"
    gpus = launch_description(sut)[1].get("gpus")
    if not dev and isinstance(gpus, dict) and gpus.get("gpus"):
        names = sorted({str(g.get("name")) for g in gpus["gpus"]})
        drivers = sorted({str(g.get("driver_version")) for g in gpus["gpus"]})
        cvd = launch_description(sut)[1].get("cuda_visible_devices")
        dev = " + ".join(names)
        device = (f"{dev} x{len(gpus['gpus'])} on the host (driver {', '.join(drivers)}; "
                  f"{gpus.get('source')} at launch; CUDA_VISIBLE_DEVICES "
                  f"{_or(cvd, 'not set')})")
        dev_evidence = "recorded (host GPU inventory)"
    elif not dev and isinstance(gpus, dict) and gpus.get("status") == "unavailable":
        device = f"{NO_INFO}; no GPU inventory at launch ({gpus.get('reason')})"
    return device, dev, dev_evidence


def _memory(info: dict, flags: dict, host: dict) -> tuple[str, str]:
    """(the memory row, its evidence)."""
    mem = [f"{k} {info[k]}" for k in ("weight_bytes", "kv_cache_bytes", "max_model_len")
           if info.get(k) is not None]
    if info.get("max_model_len") is None and flags.get("max-model-len") is not None:
        mem.append(f"max_model_len {flags['max-model-len']} (--max-model-len)")
    memory = ("server: " + ", ".join(mem) if mem else NO_INFO) + (
        f"; client host memory {host['memory_bytes']} B" if host.get("memory_bytes") else "")
    return memory, (("recorded (server)" if any(info.get(k) is not None for k in (
        "weight_bytes", "kv_cache_bytes", "max_model_len")) else "recorded (launch flags)")
        if mem else "unmeasured")


def _split(summary: dict, meta: dict, sut: dict, host: dict, dev: Optional[str]) -> str:
    managed = sut.get("managed_server")
    where = ("a process loadgen started on the same host" if managed else "external at "
             + _or(sut.get("target_url") or meta.get("target_url"), "an unrecorded URL"))
    cpu = (summary.get("client") or {}).get("cpu_fraction")
    return (f"client: loadgen on the host CPU ({_or(host.get('cpu_affinity'), '?')} usable cores, "
            f"client_cpu {_or(cpu, 'not recorded')} of a core); server: {where}, running on "
            f"{_or(dev, 'an unrecorded device')}")


def _boundary(summary: dict, info: dict) -> str:
    compile_s = info.get("compile_s")
    return ("client-side perf_counter_ns: TTFT from just before the request bytes are written "
            "(and from the scheduled time in server mode) to the first chunk carrying a token; "
            f"E2E to the last byte read; warm-up requests excluded; window: "
            f"{(summary.get('window') or {}).get('rule')}"
            + (f"; server compile ({compile_s} s) happened before it reported ready"
               if compile_s is not None else ""))


def conditions_table(summary: dict, meta: dict, sut: dict, records: list[dict]) -> list[dict]:
    """The 11 comparison conditions: task, accuracy, precision, batch, device unit, software
    versions, memory, execution split, time boundary, cost/power, evidence."""
    info, host = server_info(sut), sut.get("client_host") or {}
    flags = launch_description(sut)[1].get("flags") or {}
    accuracy = meta.get("accuracy")
    prec, prec_evidence = precision(info, sut)
    device, dev, dev_evidence = _device(info, sut)
    memory, memory_evidence = _memory(info, flags, host)
    energy = summary.get("energy") or {}
    versions, versions_evidence = _versions(meta, sut, info)
    rows = [
        ("task", _task(summary, meta, sut, info, records),
         "measured (token lengths) / recorded (model, API)"),
        ("accuracy", _or(accuracy, "unmeasured: loadgen measures performance only; no accuracy "
                                   "check ran in this run"), "recorded" if accuracy else "unmeasured"),
        ("precision", prec, prec_evidence),
        ("batch", _batch(meta, info, flags, records), "recorded / measured"),
        ("device unit", device, dev_evidence),
        ("software versions", versions or "not recorded: sut.json carries no version strings",
         versions_evidence if versions else "unmeasured"),
        ("memory", memory, memory_evidence),
        ("execution split", _split(summary, meta, sut, host, dev), "recorded"),
        ("time boundary", _boundary(summary, info), "documented (method)"),
        ("cost/power", f"energy {energy.get('status', 'unmeasured')}"
                       + (f": {energy['reason']}" if energy.get("reason") else ""),
         energy.get("status", "unmeasured")),
        ("evidence", "latencies and throughput measured client-side; device specs documented; "
                     "roofline bounds calculated; missing figures marked unmeasured", "—"),
    ]
    return [{"item": a, "value": b, "evidence": c} for a, b, c in rows]


CALIBRATION = Path("~/.cache/loadgen/calibration.json")  # where `loadgen calibrate` saves


def device_spec(meta: dict, sut: dict, calibration: Path = CALIBRATION):
    """(spec, how it was chosen): a spec file named in meta (``device_spec``); else the catalogue
    entry matching the server's device name; else the local calibration when it was measured on
    the run's host for the same kind of device (cpu vs not); else (None, why)."""
    try:
        from analysis.roofline import devices
    except ImportError as e:
        return None, f"analysis.roofline.devices not importable ({e})"
    path = meta.get("device_spec")
    if isinstance(path, str):
        try:
            return devices.load_spec(path), f"spec file {path}"
        except (OSError, ValueError, KeyError) as e:
            return None, f"device spec {path} unreadable ({e})"
    info = server_info(sut)
    name = info.get("device_kind") or info.get("device")
    spec = devices.find(str(name)) if name else None
    if spec is not None:
        return spec, "catalogue match on the server's device name"
    cal = calibration.expanduser()
    if cal.is_file():
        try:
            spec = devices.load_spec(cal)
        except (OSError, ValueError, KeyError):
            spec = None
        host = (sut.get("client_host") or {}).get("hostname")
        same_kind = (spec is not None and (spec.meta.get("kind") == "cpu")
                     == (info.get("backend") == "cpu"))
        if spec is not None and host and spec.meta.get("host") == host and same_kind:
            return spec, f"local calibration {cal} (measured on {host})"
    return None, ("no device spec: the server's device is not in analysis.roofline.devices, no spec file "
                  "was named (meta.device_spec) and no local calibration of this host matches")


def roofline_section(summary: dict, meta: dict, sut: dict, records: list[dict],
                     calibration: Path = CALIBRATION) -> dict:
    """Measured TPOT / TTFT against the roofline floors (analysis.roofline.roofline.serving_bounds).

    batch = time-weighted mean requests in flight over the window, capped at the server's slots
    (at least 1); context_len = mean prompt + half the mean output (mean context during decode);
    prompt_tokens = mean prompt. Returns {"status": ..., "reason"/...} — never a guessed figure.
    """
    try:
        from analysis.roofline import roofline
    except ImportError as e:
        return {"status": "unavailable", "reason": f"analysis.roofline.roofline not importable ({e})"}
    shape = model_shape(sut)
    if shape is None:
        return {"status": "unavailable", "reason": "sut.json has no model shape (n_layers, dim, ...)"}
    spec, spec_from = device_spec(meta, sut, calibration)
    if spec is None:
        return {"status": "unavailable", "reason": spec_from}
    done = m.completed(m.measured(records))
    p_in = _mean(r.get("prompt_tokens") for r in done)
    p_out = _mean(r.get("output_tokens") for r in done)
    win = m.window(records)
    if p_in is None or p_out is None or win is None:
        return {"status": "unavailable", "reason": "no completed requests with token counts"}
    steps = m.in_flight(m.measured(records))
    area = sum((t1 - t0) * n for (t0, n), (t1, _) in zip(steps, steps[1:]))
    batch = max(1, round(area / (win[1] - win[0])))
    slots = server_info(sut).get("slots") or shape.get("slots")
    if isinstance(slots, int):
        batch = min(batch, slots)
    ctx = max(1, round(p_in + p_out / 2))
    b = roofline.serving_bounds(shape, spec, batch, ctx, max(1, round(p_in)))
    tpot = (summary.get("tpot_ms") or {}).get("p50")
    ttft = (summary.get("ttft_ms") or {}).get("min")
    step_bytes = b["decode_step"]["bytes"]
    achieved_bw = step_bytes / (tpot / 1e3) if tpot else None
    tpot_frac = roofline.fraction_of_bound(
        None if b["tpot_lower_bound_ms"] is None else b["tpot_lower_bound_ms"] / 1e3,
        None if tpot is None else tpot / 1e3)
    ttft_frac = roofline.fraction_of_bound(
        None if b["ttft_lower_bound_ms"] is None else b["ttft_lower_bound_ms"] / 1e3,
        None if ttft is None else ttft / 1e3)
    warnings = [f"measured {what} is below its calculated floor (floor/measured {f:.2f}): the "
                "spec's rates are lower than this device achieved (e.g. a calibration's achieved, "
                "not peak, rate), so this floor is not a bound here"
                for what, f in (("TPOT", tpot_frac), ("TTFT", ttft_frac)) if f is not None and f > 1]
    return {"status": "calculated", "device": getattr(spec, "name", "spec"), "spec_from": spec_from,
            "bounds": b, "measured_tpot_p50_ms": tpot, "measured_ttft_min_ms": ttft,
            "tpot_fraction_of_bound": tpot_frac, "ttft_fraction_of_bound": ttft_frac,
            "achieved_decode_bandwidth": achieved_bw,
            "mbu": roofline.mbu(achieved_bw, b["decode_step"]["bandwidth"]), "warnings": warnings,
            "rule": "TPOT p50 vs decode-step floor (bytes/BW vs FLOPs/peak) at the mean batch; "
                    "fastest TTFT (least queueing) vs the prefill floor of the mean prompt"}
