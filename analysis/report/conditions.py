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

from analysis.contract import RunMeta, Sut
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


def _task(summary: dict, meta: dict, sut: dict, info: dict, records: Records) -> str:
    done = m.completed(m.measured(records))
    name = RunMeta.read(meta).model_name(Sut.read(sut))   # the one typed accessor
    p_in = _mean(m.field(done, "prompt_tokens"))
    p_out = _mean(m.field(done, "output_tokens"))
    lens = ("token lengths not recorded (no completed requests)" if p_in is None else
            f"mean prompt {p_in:.1f} tokens, mean output "
            f"{'n/a' if p_out is None else f'{p_out:.1f}'} tokens (measured)")
    wl = meta.get("workload") or {}
    wl_txt = (f"; workload {wl.get('source')} (tokenizer {wl.get('tokenizer')}, counts "
              f"{wl.get('token_count')})" if wl else "")
    endpoint = meta.get("endpoint") or sut.get("endpoint")
    return (f"model {_or(name, 'not recorded')}; {_or(endpoint, 'endpoint not recorded')} API; "
            f"mode {summary.get('mode')}; {lens}{wl_txt}")


def _batch(meta: dict, info: dict, flags: dict, records: Records) -> str:
    slots = info.get("slots")
    if slots is None and flags.get("max-num-seqs") is not None:
        slots = f"{flags['max-num-seqs']} (--max-num-seqs)"
    _, meas, _, _ = m.selections(records)
    counts = m.in_flight_steps(records, meas)[1]     # the measured records' steps (arrays)
    peak = int(counts.max()) if counts.size else None
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


def conditions_table(summary: dict, meta: dict, sut: dict, records: Records) -> list[dict]:
    """The 11 comparison conditions: task, accuracy, precision, batch, device unit, software
    versions, memory, execution split, time boundary, cost/power, evidence."""
    info, host = server_info(sut), sut.get("client_host") or {}
    flags = launch_description(sut)[1].get("flags") or {}
    accuracy = meta.get("accuracy")
    if accuracy and summary.get("accuracy"):        # the check ran: its figure, not the dict
        from analysis.report.cost_accuracy import accuracy_text
        accuracy = (f"{accuracy_text(summary['accuracy'])} ({accuracy.get('dataset')})"
                    if isinstance(accuracy, dict) else accuracy)
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


def _device_row(dev: dict) -> list:
    """The roofline's device row: name, where the spec came from, its evidence."""
    where = {"frozen": "frozen into the run's device.json",
             "override": "recomputed now (not the run's frozen spec)",
             "meta.device_spec": "meta.json's spec file"}.get(dev.get("source"), "source unknown")
    when = (f"; measured {dev['measured_at']}" + (f" on {dev['host']}" if dev.get("host") else "")
            if dev.get("measured_at") and str(dev["measured_at"]) not in str(dev.get("how"))
            else "")
    return ["device", f"{dev.get('name')} ({where}: {dev.get('how')}{when})",
            _or(dev.get("evidence"), "unknown")]


def roofline_blocks(r: Optional[dict]) -> list[Block]:
    """The report's roofline section, rendered from summary.json's "roofline" block
    (analysis.roofline.run_roofline computed it from the spec frozen into the run)."""
    out: list[Block] = [("h", "Roofline (calculated floors vs measured)")]
    if not r:
        return out + [("p", "Not shown: this summary has no roofline block (written before the "
                            "roofline was frozen into the run).")]
    dev = r.get("device") or {}
    if dev.get("source") == "override":
        out.append(("warn", f"Recomputed against {dev.get('how')}, not the spec frozen into the "
                            f"run ({_or(dev.get('frozen'), 'none was recorded')})."))
    if r.get("status") != "calculated":
        return out + [("p", f"Not shown: {r.get('reason')}.")]
    out += [("warn", b["text"]) for b in r.get("broken_floors") or []]
    d, p = r.get("decode") or {}, r.get("prefill") or {}
    gb = lambda x: "n/a" if x is None else f"{x / 1e9:.4g} GB/s"  # noqa: E731
    tf = lambda x: "n/a" if x is None else f"{x / 1e12:.4g} TFLOP/s"  # noqa: E731
    mbu = fmt(r.get("mbu"), 4) if r.get("mbu") is not None or not r.get("broken_floors") \
        else "n/a (broken floor)"
    rows = [_device_row(dev),
            [f"memory bandwidth, peak {dev.get('dtype')}",
             f"{gb(dev.get('mem_bandwidth'))}, {tf(dev.get('peak_flops'))}",
             _or(dev.get("evidence"), "unknown")],
            ["decode batch (mean in flight), context",
             f"{d.get('batch')} ({fmt(d.get('mean_in_flight'))}), {d.get('context_len')}",
             "measured (means)"],
            ["decode step bytes / FLOPs", f"{d['step_bytes']:.4g} / {d['step_flops']:.4g}",
             "calculated"],
            ["decode floor (ms): memory / compute, binding",
             f"{fmt(r.get('decode_floor_ms'), 4)}: {fmt(d.get('memory_floor_ms'), 4)} / "
             f"{fmt(d.get('compute_floor_ms'), 4)}, {d.get('binding')}", "calculated"],
            ["measured TPOT p50 (ms)", fmt(r.get("tpot_p50_ms"), 4), "measured"],
            ["floor / measured TPOT", fmt(d.get("floor_over_measured"), 4), "calculated"],
            ["achieved decode bandwidth, MBU", f"{gb(d.get('achieved_bandwidth'))}, {mbu}",
             "calculated"]] + _batch1_rows(r)
    if p:
        rows += [["prefill: the request nearest its own floor",
                  f"TTFT {fmt(p.get('ttft_ms'), 4)} ms vs floor {fmt(p.get('floor_ms'), 4)} ms "
                  f"({p.get('prompt_tokens')}-token prompt; floor / TTFT "
                  f"{fmt(p.get('floor_over_ttft'), 4)}, {p.get('binding')})",
                  "measured vs calculated"],
                 ["prefill floors (ms), each request's own prompt",
                  f"{fmt(p.get('floor_ms_min'), 4)} to {fmt(p.get('floor_ms_max'), 4)} over "
                  f"{p.get('requests')} requests; {p.get('below_floor')} below their floor",
                  "calculated"]]
    return out + [("table", ["figure", "value", "evidence"], rows),
                  ("p", f"Rule: {r.get('rule')}. Assumptions: {r.get('assumptions')}.")] \
        + _levels_blocks(r)


B1 = "batch-1 decode (1 request in flight)"
OLD = "not in this summary (written before the by-in-flight split; `loadgen report RUN_DIR` " \
      "recomputes it)"


def _batch1_rows(r: dict) -> list[list]:
    """The batch-1 decode step: ITL p50 (measured) vs its floor (calculated), MBU, gaps; a
    missing figure with its reason, never 0."""
    b = r.get("batch1")
    if not b:
        return [[B1, missing(OLD), "n/a"]]
    if b.get("itl_p50_ms") is None:
        return [[B1, missing(b.get("reason")), "n/a"]]
    mbu = fmt(b["mbu"], 4) if b.get("mbu") is not None else missing(b.get("reason"))
    return [[f"{B1}: ITL p50 (ms), gaps, context",
             f"{fmt(b['itl_p50_ms'], 4)} over {b.get('gaps')} gaps, context "
             f"{fmt(b.get('context_len'), 1)} tokens", "measured"],
            [f"{B1}: decode floor (ms), MBU", f"{fmt(b.get('floor_ms'), 4)}, MBU {mbu}",
             "calculated"]]


def _levels_blocks(r: dict) -> list[Block]:
    """The decode step by requests in flight: one row per level (by_concurrency.py)."""
    levels = r.get("by_in_flight")
    if levels is None:
        return []
    if not levels:
        return [("p", "Decode step by requests in flight: no inter-token gap to attribute.")]
    gb = lambda x: "n/a" if x is None else f"{x / 1e9:.4g}"  # noqa: E731
    rows = [[x.get("in_flight"), x.get("batch"), x.get("gaps"), fmt(x.get("itl_p50_ms"), 3),
             fmt(x.get("context_len"), 1), fmt(x.get("floor_ms"), 3),
             gb(x.get("achieved_bandwidth")),
             fmt(x["mbu"], 3) if x.get("mbu") is not None else missing(x.get("reason"))]
            for x in levels]
    return [("table", ["requests in flight", "decode batch", "gaps", "ITL p50 (ms, measured)",
                       "context (tokens)", "floor (ms, calculated)", "achieved GB/s", "MBU"], rows),
            ("p", f"By requests in flight: {r.get('by_in_flight_rule')}; "
                  f"{_or(r.get('by_in_flight_dropped'), 'n/a')} gaps dropped (the count changed "
                  "inside them).")]
