"""A run against its roofline: summary.json's "roofline" block, from the records and the frozen spec.

    records + model shape (sut.json) + device (run_device.for_run: device.json, or --device)
        ─► roofline_summary() ─► {status, reason, mbu, tpot_p50_ms, decode_floor_ms,
                                  prefill_floor_ms, device {name, evidence, mem_bandwidth (B/s),
                                  measured_at, source, how}, decode {...}, prefill {...},
                                  broken_floors [...], rule, assumptions,
                                  by_in_flight [rows], batch1 {...}  (by_concurrency.py)}
    run_dir ─► for_run()     (the summary's hook: reads sut.json, meta.json, device.json)
            ─► sweep_point() (the sweep report's view: the same figures + serving_bounds)

Decode: TPOT p50 against the decode-step floor at the run's batch (time-weighted mean requests in
flight over the window, capped at the server's slots) and context (mean prompt + half the mean
output); MBU = step bytes / TPOT p50 / bandwidth. Prefill, like with like: each completed request's
TTFT against the floor of *its own* prompt length; the block reports the request nearest its floor
(largest floor / TTFT). A floor above a measurement is a broken floor ("measured below the floor:
the spec is wrong or the boundary differs"), listed in ``broken_floors``; MBU is then None, never
above 1. Missing inputs give None with the reason, never a guess. The per-request definitions
(TTFT, TPOT, window, in flight) restate analysis.metrics.figures, which roofline may not import.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from analysis.contract import timing
from analysis.contract.device import SpecMeta
from analysis.contract.records import Records, as_records, read_records
from analysis.contract.rundir import read_dict
from analysis.roofline import by_concurrency, run_device, model_cost, bounds
from analysis.roofline.by_concurrency import BROKEN
from analysis.roofline.model_spec import shape_in_sut
from analysis.contract.rundir import has_records, records_path

RULE = ("TPOT p50 vs the decode-step floor (max of bytes / bandwidth, FLOPs / peak) at the mean "
        "batch and context; each request's TTFT vs the prefill floor of its own prompt, the "
        "request nearest its floor reported")
KEYS = ("mbu", "tpot_p50_ms", "decode_floor_ms", "prefill_floor_ms")


_ttft_ms, _tpot_ms = timing.ttft_ms, timing.tpot_ms     # the one definition of each


def _mean_in_flight(measured: Records) -> Optional[float]:
    """Time-weighted mean requests in flight over the window (first send to last end)."""
    measured = as_records(measured)
    spans = [(r.sent_at_ns, r.end_at_ns) for r in measured
             if r.status in ("ok", "error") and r.sent_at_ns is not None
             and r.end_at_ns is not None]
    if not spans:
        return None
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    if end <= start:
        return None
    ev = sorted([(t, 1) for t, _ in spans] + [(t, -1) for _, t in spans])
    area, n, prev = 0, 0, start
    for t, d in ev:
        area += (t - prev) * n
        n, prev = n + d, t
    return area / (end - start)


def _mean(xs) -> Optional[float]:
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None


def _device_block(device: Optional[dict], dtype: str) -> Optional[dict]:
    spec = (device or {}).get("spec")
    if spec is None:
        return None
    bw, sm = spec.mem_bandwidth, SpecMeta.read(spec.meta)       # the spec file's provenance
    out = {"name": spec.name, "evidence": sm.evidence or (bw.evidence if bw else None),
           "mem_bandwidth": spec.bandwidth(), "peak_flops": spec.peak_flops(dtype), "dtype": dtype,
           "measured_at": sm.date, "host": sm.host,
           "source": device["source"], "how": device["how"]}          # run_device.for_run's
    if device["source"] == "override":
        out["frozen"] = device["frozen"]
    return out


def _empty(reason: str, device: Optional[dict] = None) -> dict:
    return {"status": "unavailable", "reason": reason, **{k: None for k in KEYS},
            "device": device, "decode": None, "prefill": None, "broken_floors": []}


def _prefill(done: Records, shape: dict, spec, dtype: str) -> Optional[dict]:
    """Each request's TTFT against its own prompt's floor; the one nearest its floor."""
    done = as_records(done)
    rows = []
    for r in done:
        p, ttft = r.prompt_tokens, _ttft_ms(r)
        if not p or ttft is None or ttft <= 0:
            continue
        b = bounds.bound(model_cost.prefill_flops(shape, p),
                           model_cost.weight_bytes(shape) + p * model_cost.kv_bytes_per_token(shape),
                           spec, dtype)
        if b.time_s is not None:
            rows.append((b.time_s * 1e3 / ttft, b.time_s * 1e3, ttft, p, b.binding))
    if not rows:
        return None
    near = max(rows)
    return {"requests": len(rows), "floor_ms": near[1], "ttft_ms": near[2], "prompt_tokens": near[3],
            "floor_over_ttft": near[0], "binding": near[4],
            "below_floor": sum(1 for x in rows if x[0] > 1),
            "floor_ms_min": min(x[1] for x in rows), "floor_ms_max": max(x[1] for x in rows)}


def _compute(records: Records, shape: Optional[dict], device: Optional[dict],
             slots: Optional[int] = None) -> tuple[dict, Optional[dict]]:
    """(the block, serving_bounds at the run's batch / context / mean prompt, or None)."""
    records = as_records(records)
    dtype = (shape or {}).get("dtype", "bf16")
    dev = _device_block(device, dtype)
    if shape is None:
        return _empty("sut.json has no model shape (n_layers, dim, ...)", dev), None
    if dev is None:
        return _empty((device or {}).get("reason") or run_device.NOT_RECORDED), None
    spec = device["spec"]
    measured = [r for r in records if r.phase != "warmup"]
    done = [r for r in measured if r.status == "ok"]
    p_in = _mean(r.prompt_tokens for r in done)
    p_out = _mean(r.output_tokens for r in done)
    mean_batch = _mean_in_flight(measured)
    if p_in is None or p_out is None or mean_batch is None:
        return _empty("no completed requests with token counts", dev), None
    batch = max(1, round(mean_batch))
    if isinstance(slots or shape.get("slots"), int):
        batch = min(batch, slots or shape["slots"])
    ctx = max(1, round(p_in + p_out / 2))
    b = bounds.serving_bounds(shape, spec, batch, ctx, max(1, round(p_in)))
    step = b["decode_step"]
    tpots = [x for x in (_tpot_ms(r) for r in done) if x is not None]
    tpot = float(np.median(tpots)) if tpots else None      # = numpy's linear p50, as summary's
    floor = b["tpot_lower_bound_ms"]
    achieved = step["bytes"] / (tpot / 1e3) if tpot else None
    mbu = bounds.mbu(achieved, step["bandwidth"])
    broken = []
    if tpot is not None and floor is not None and floor > tpot:
        broken.append({"figure": "TPOT p50", "floor_ms": floor, "measured_ms": tpot,
                       "text": f"TPOT p50 {tpot:.4g} ms is below its decode floor {floor:.4g} ms: "
                               + BROKEN})
    if mbu is not None and mbu > 1:
        mbu = None            # the memory floor is broken: never an MBU above 1
    pre = _prefill(done, shape, spec, dtype)
    if pre is not None and pre["below_floor"]:
        broken.append({"figure": "TTFT", "floor_ms": pre["floor_ms"], "measured_ms": pre["ttft_ms"],
                       "text": f"{pre['below_floor']} of {pre['requests']} requests had a TTFT "
                               f"below their own prefill floor (e.g. {pre['ttft_ms']:.4g} ms vs "
                               f"{pre['floor_ms']:.4g} ms for a {pre['prompt_tokens']}-token "
                               f"prompt): " + BROKEN})
    levels = by_concurrency.by_in_flight(records, shape, spec, slots or shape.get("slots"))
    one = next((x for x in levels["by_in_flight"] if x["in_flight"] == 1 and x["broken"]), None)
    if one is not None:       # the batch-1 decode step measured below its floor
        broken.append({"figure": "ITL p50 at 1 in flight", "floor_ms": one["floor_ms"],
                       "measured_ms": one["itl_p50_ms"],
                       "text": "batch-1 decode: " + one["reason"]})
    ms = lambda s: None if s is None else s * 1e3  # noqa: E731
    block = {
        "status": "calculated", "reason": None, "evidence": "calculated",
        "mbu": mbu, "tpot_p50_ms": tpot, "decode_floor_ms": floor,
        "prefill_floor_ms": pre["floor_ms"] if pre else None, "device": dev,
        "decode": {"batch": batch, "mean_in_flight": mean_batch, "context_len": ctx,
                   "prompt_tokens": max(1, round(p_in)), "step_bytes": step["bytes"],
                   "step_flops": step["flops"], "memory_floor_ms": ms(step["memory_s"]),
                   "compute_floor_ms": ms(step["compute_s"]), "binding": step["binding"],
                   "achieved_bandwidth": achieved,
                   "floor_over_measured": bounds.fraction_of_bound(ms(floor), ms(tpot))},
        "prefill": pre, "broken_floors": broken, "rule": RULE, "assumptions": b["assumptions"],
        **levels}
    return block, b


def roofline_summary(records: Records, model_spec: Optional[dict], device: Optional[dict],
                     slots: Optional[int] = None) -> dict:
    """summary.json's "roofline" block. ``device``: run_device.for_run()'s dict (``spec`` a
    DeviceSpec, ``source``, ``how``, or ``reason`` when there is none); ``slots``: the server's
    decode batch limit (else the shape's)."""
    return _compute(records, model_spec, device, slots)[0]


def _inputs(run_dir: str | Path, records: Optional[Records]):
    d = Path(run_dir)
    sut, meta = read_dict(d, "sut.json"), read_dict(d, "meta.json")   # through the models
    if records is None:
        records = read_records(records_path(d)) if has_records(d) else []
    slots = run_device.server_info(sut).get("slots")
    return records, shape_in_sut(sut), run_device.for_run(d, meta), slots


def for_run(run_dir: str | Path, records: Optional[Records] = None) -> dict:
    """roofline_summary of a run directory (its records unless given)."""
    records, shape, device, slots = _inputs(run_dir, records)
    return roofline_summary(records, shape, device, slots if isinstance(slots, int) else None)


def sweep_point(run_dir: str | Path, records: Optional[Records] = None) -> dict:
    """The block of for_run plus what the sweep report draws: ``bounds`` (serving_bounds at the
    run's batch), ``spec`` (the DeviceSpec, for the floor curve over batches)."""
    records, shape, device, slots = _inputs(run_dir, records)
    block, bounds = _compute(records, shape, device, slots if isinstance(slots, int) else None)
    return {**block, "bounds": bounds, "spec": device.get("spec"), "shape": shape}
