"""The comparison conditions beside the numbers, and the roofline section, rendered for the report.

    summary + meta + sut.json (+ records) ─► conditions_table ─► 11 rows (item, value, evidence),
        one helper a row where it takes more than a line; what sut.json says comes from sut.py
    summary.json "roofline" (analysis.roofline.run_roofline, from the run's frozen device.json)
        ─► roofline_blocks ─► device and its evidence, floors vs measured, broken floors,
           the batch-1 decode step and the decode step by requests in flight (by_concurrency)

A figure is never guessed: a missing one reads ``not recorded`` / ``unmeasured`` with the reason.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from analysis.contract import RunMeta, Summary, Sut
from analysis.contract.summary import Energy
from analysis.contract.summary_roofline import Decode, Roofline, RooflineDevice
from analysis.contract.target import ClientHost
from analysis.metrics import figures as m
from analysis.report.render import Block, fmt, missing
from analysis.report.sut import launch_description, precision, server_info, server_software
from analysis.contract.records import Records

NO_INFO = "not recorded: the server published no /info"


def _mean(values) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _or(value: Any, missing: str) -> str:
    return missing if value in (None, "", [], {}) else str(value)


def _versions(meta: RunMeta, sut: dict, host: ClientHost, info: dict) -> tuple[str, str]:
    """(the software versions row, its evidence)."""
    server, sources = server_software(sut, info)
    client = {"loadgen": meta.loadgen_version, "python": host.python}
    client.update({k: v for k, v in host.packages.items() if v})
    client = {k: v for k, v in client.items() if v}
    parts = []
    if server:
        parts.append("server: " + ", ".join(f"{k} {v}" for k, v in server.items()))
    if client:
        parts.append("client: " + ", ".join(f"{k} {v}" for k, v in client.items()))
        sources.append("client package metadata")
    return "; ".join(parts), ("recorded (" + "; ".join(sources) + ")" if sources else "recorded")


def _task(summary: Summary, meta: RunMeta, sut: Sut, records: Records) -> str:
    done = m.completed(m.measured(records))
    name = meta.model_name(sut)   # the one typed accessor
    p_in = _mean(m.field(done, "prompt_tokens"))
    p_out = _mean(m.field(done, "output_tokens"))
    lens = ("token lengths not recorded (no completed requests)" if p_in is None else
            f"mean prompt {p_in:.1f} tokens, mean output "
            f"{'n/a' if p_out is None else f'{p_out:.1f}'} tokens (measured)")
    wl = meta.workload
    wl_txt = (f"; workload {wl.source} (tokenizer {wl.tokenizer}, counts "
              f"{wl.token_count})" if wl else "")
    endpoint = meta.endpoint or sut.endpoint
    return (f"model {_or(name, 'not recorded')}; {_or(endpoint, 'endpoint not recorded')} API; "
            f"mode {summary.mode}; {lens}{wl_txt}")


def _batch(meta: RunMeta, info: dict, flags: dict, records: Records) -> str:
    slots = info.get("slots")
    if slots is None and flags.get("max-num-seqs") is not None:
        slots = f"{flags['max-num-seqs']} (--max-num-seqs)"
    _, meas, _, _ = m.selections(records)
    counts = m.in_flight_steps(records, meas)[1]     # the measured records' steps (arrays)
    peak = int(counts.max()) if counts.size else None
    cap = meta.in_flight_cap
    return (f"server slots {_or(slots, 'not recorded')}; client in-flight cap "
            f"{_or(cap, 'none (open loop)')}; peak in flight {_or(peak, 'n/a')} (measured)")


def _device(info: dict, sut: dict) -> tuple[str, Optional[str], str]:
    """(the device unit row, the device's name or None, its evidence): the server's /info, else
    the host's GPU inventory taken when loadgen launched the server."""
    dev = info.get("device_kind") or info.get("device")
    device = (f"{dev} x{info.get('device_count', '?')} (backend {info.get('backend')})" if dev
              else NO_INFO)
    dev_evidence = "recorded (server)" if dev else "unmeasured"
    launch = launch_description(sut)[1]
    gpus = launch.gpus
    if not dev and gpus is not None and gpus.gpus:
        names = sorted({str(g.name) for g in gpus.gpus})
        drivers = sorted({str(g.driver_version) for g in gpus.gpus})
        dev = " + ".join(names)
        device = (f"{dev} x{len(gpus.gpus)} on the host (driver {', '.join(drivers)}; "
                  f"{gpus.source} at launch; CUDA_VISIBLE_DEVICES "
                  f"{_or(launch.cuda_visible_devices, 'not set')})")
        dev_evidence = "recorded (host GPU inventory)"
    elif not dev and gpus is not None and gpus.status == "unavailable":
        device = f"{NO_INFO}; no GPU inventory at launch ({gpus.reason})"
    return device, dev, dev_evidence


def _memory(info: dict, flags: dict, host: ClientHost) -> tuple[str, str]:
    """(the memory row, its evidence)."""
    mem = [f"{k} {info[k]}" for k in ("weight_bytes", "kv_cache_bytes", "max_model_len")
           if info.get(k) is not None]
    if info.get("max_model_len") is None and flags.get("max-model-len") is not None:
        mem.append(f"max_model_len {flags['max-model-len']} (--max-model-len)")
    memory = ("server: " + ", ".join(mem) if mem else NO_INFO) + (
        f"; client host memory {host.memory_bytes} B" if host.memory_bytes else "")
    return memory, (("recorded (server)" if any(info.get(k) is not None for k in (
        "weight_bytes", "kv_cache_bytes", "max_model_len")) else "recorded (launch flags)")
        if mem else "unmeasured")


def _split(summary: Summary, meta: RunMeta, sut: Sut, dev: Optional[str]) -> str:
    host = sut.client_host or ClientHost()
    where = ("a process loadgen started on the same host" if sut.managed_server else "external at "
             + _or(sut.target_url or meta.target_url, "an unrecorded URL"))
    cpu = summary.client.cpu_fraction if summary.client else None
    return (f"client: loadgen on the host CPU ({_or(host.cpu_affinity, '?')} usable cores, "
            f"client_cpu {_or(cpu, 'not recorded')} of a core); server: {where}, running on "
            f"{_or(dev, 'an unrecorded device')}")


def _boundary(summary: Summary, info: dict) -> str:
    compile_s = info.get("compile_s")
    return ("client-side perf_counter_ns: TTFT from just before the request bytes are written "
            "(and from the scheduled time in server mode) to the first chunk carrying a token; "
            f"E2E to the last byte read; warm-up requests excluded; window: "
            f"{summary.window.rule if summary.window else None}"
            + (f"; server compile ({compile_s} s) happened before it reported ready"
               if compile_s is not None else ""))


def conditions_table(summary: dict, meta: dict, sut: dict, records: Records) -> list[dict]:
    """The 11 comparison conditions: task, accuracy, precision, batch, device unit, software
    versions, memory, execution split, time boundary, cost/power, evidence."""
    info, typed = server_info(sut), Sut.read(sut)
    host = typed.client_host or ClientHost()
    flags = launch_description(sut)[1].flags                  # by flag name: a mapping
    summary, meta = Summary.read(summary), RunMeta.read(meta)   # the files, typed, read once
    accuracy = meta.accuracy
    if accuracy and summary.accuracy:        # the check ran: its figure, not the dict
        from analysis.report.cost_accuracy import accuracy_text
        accuracy = (f"{accuracy_text(summary.accuracy)} ({accuracy.get('dataset')})"
                    if isinstance(accuracy, dict) else accuracy)
    prec, prec_evidence = precision(info, sut)
    device, dev, dev_evidence = _device(info, sut)
    memory, memory_evidence = _memory(info, flags, host)
    energy = summary.energy or Energy()
    status = energy.status if "status" in energy.model_fields_set else "unmeasured"
    versions, versions_evidence = _versions(meta, sut, host, info)
    rows = [
        ("task", _task(summary, meta, typed, records),
         "measured (token lengths) / recorded (model, API)"),
        ("accuracy", _or(accuracy, "unmeasured: loadgen measures performance only; no accuracy "
                                   "check ran in this run"), "recorded" if accuracy else "unmeasured"),
        ("precision", prec, prec_evidence),
        ("batch", _batch(meta, info, flags, records), "recorded / measured"),
        ("device unit", device, dev_evidence),
        ("software versions", versions or "not recorded: sut.json carries no version strings",
         versions_evidence if versions else "unmeasured"),
        ("memory", memory, memory_evidence),
        ("execution split", _split(summary, meta, typed, dev), "recorded"),
        ("time boundary", _boundary(summary, info), "documented (method)"),
        ("cost/power", f"energy {status}" + (f": {energy.reason}" if energy.reason else ""),
         status),
        ("evidence", "latencies and throughput measured client-side; device specs documented; "
                     "roofline bounds calculated; missing figures marked unmeasured", "—"),
    ]
    return [{"item": a, "value": b, "evidence": c} for a, b, c in rows]


WHERE = {"frozen": "frozen into the run's device.json",
         "override": "recomputed now (not the run's frozen spec)",
         "meta.device_spec": "meta.json's spec file"}


def _device_row(dev: RooflineDevice) -> list:
    """The roofline's device row: name, where the spec came from, its evidence."""
    where = WHERE.get(dev.source, "source unknown")
    when = (f"; measured {dev.measured_at}" + (f" on {dev.host}" if dev.host else "")
            if dev.measured_at and str(dev.measured_at) not in str(dev.how) else "")
    return ["device", f"{dev.name} ({where}: {dev.how}{when})", _or(dev.evidence, "unknown")]


def roofline_blocks(r: Optional[dict | Roofline]) -> list[Block]:
    """The report's roofline section, rendered from summary.json's "roofline" block
    (analysis.roofline.run_roofline computed it from the spec frozen into the run)."""
    out: list[Block] = [("h", "Roofline (calculated floors vs measured)")]
    if not r:
        return out + [("p", "Not shown: this summary has no roofline block (written before the "
                            "roofline was frozen into the run).")]
    r = Roofline.read(r)
    dev = r.device or RooflineDevice()
    if dev.source == "override":
        out.append(("warn", f"Recomputed against {dev.how}, not the spec frozen into the "
                            f"run ({_or(dev.frozen, 'none was recorded')})."))
    if r.status != "calculated":
        return out + [("p", f"Not shown: {r.reason}.")]
    out += [("warn", b.text) for b in r.broken_floors]
    d, p = r.decode or Decode(), r.prefill
    gb = lambda x: "n/a" if x is None else f"{x / 1e9:.4g} GB/s"  # noqa: E731
    tf = lambda x: "n/a" if x is None else f"{x / 1e12:.4g} TFLOP/s"  # noqa: E731
    mbu = fmt(r.mbu, 4) if r.mbu is not None or not r.broken_floors else "n/a (broken floor)"
    rows = [_device_row(dev),
            [f"memory bandwidth, peak {dev.dtype}",
             f"{gb(dev.mem_bandwidth)}, {tf(dev.peak_flops)}", _or(dev.evidence, "unknown")],
            ["decode batch (mean in flight), context",
             f"{d.batch} ({fmt(d.mean_in_flight)}), {d.context_len}", "measured (means)"],
            ["decode step bytes / FLOPs", f"{d.step_bytes:.4g} / {d.step_flops:.4g}",
             "calculated"],
            ["decode floor (ms): memory / compute, binding",
             f"{fmt(r.decode_floor_ms, 4)}: {fmt(d.memory_floor_ms, 4)} / "
             f"{fmt(d.compute_floor_ms, 4)}, {d.binding}", "calculated"],
            ["measured TPOT p50 (ms)", fmt(r.tpot_p50_ms, 4), "measured"],
            ["floor / measured TPOT", fmt(d.floor_over_measured, 4), "calculated"],
            ["achieved decode bandwidth, MBU", f"{gb(d.achieved_bandwidth)}, {mbu}",
             "calculated"]] + _batch1_rows(r)
    if p:
        rows += [["prefill: the request nearest its own floor",
                  f"TTFT {fmt(p.ttft_ms, 4)} ms vs floor {fmt(p.floor_ms, 4)} ms "
                  f"({p.prompt_tokens}-token prompt; floor / TTFT "
                  f"{fmt(p.floor_over_ttft, 4)}, {p.binding})", "measured vs calculated"],
                 ["prefill floors (ms), each request's own prompt",
                  f"{fmt(p.floor_ms_min, 4)} to {fmt(p.floor_ms_max, 4)} over "
                  f"{p.requests} requests; {p.below_floor} below their floor", "calculated"]]
    return out + [("table", ["figure", "value", "evidence"], rows),
                  ("p", f"Rule: {r.rule}. Assumptions: {r.assumptions}.")] \
        + _levels_blocks(r)


B1 = "batch-1 decode (1 request in flight)"
OLD = "not in this summary (written before the by-in-flight split; `loadgen report RUN_DIR` " \
      "recomputes it)"


def _batch1_rows(r: Roofline) -> list[list]:
    """The batch-1 decode step: ITL p50 (measured) vs its floor (calculated), MBU, gaps; a
    missing figure with its reason, never 0."""
    b = r.batch1
    if not b:
        return [[B1, missing(OLD), "n/a"]]
    if b.itl_p50_ms is None:
        return [[B1, missing(b.reason), "n/a"]]
    mbu = fmt(b.mbu, 4) if b.mbu is not None else missing(b.reason)
    return [[f"{B1}: ITL p50 (ms), gaps, context",
             f"{fmt(b.itl_p50_ms, 4)} over {b.gaps} gaps, context "
             f"{fmt(b.context_len, 1)} tokens", "measured"],
            [f"{B1}: decode floor (ms), MBU", f"{fmt(b.floor_ms, 4)}, MBU {mbu}",
             "calculated"]]


def _levels_blocks(r: Roofline) -> list[Block]:
    """The decode step by requests in flight: one row per level (by_concurrency.py)."""
    levels = r.by_in_flight
    if levels is None:
        return []
    if not levels:
        return [("p", "Decode step by requests in flight: no inter-token gap to attribute.")]
    gb = lambda x: "n/a" if x is None else f"{x / 1e9:.4g}"  # noqa: E731
    rows = [[x.in_flight, x.batch, x.gaps, fmt(x.itl_p50_ms, 3), fmt(x.context_len, 1),
             fmt(x.floor_ms, 3), gb(x.achieved_bandwidth),
             fmt(x.mbu, 3) if x.mbu is not None else missing(x.reason)]
            for x in levels]
    return [("table", ["requests in flight", "decode batch", "gaps", "ITL p50 (ms, measured)",
                       "context (tokens)", "floor (ms, calculated)", "achieved GB/s", "MBU"], rows),
            ("p", f"By requests in flight: {r.by_in_flight_rule}; "
                  f"{_or(r.by_in_flight_dropped, 'n/a')} gaps dropped (the count changed "
                  "inside them).")]
