"""One decode step as GEMVs: predicted from the bandwidth bound, timed with the kernel harness, and set
beside the engine's measured step.

    shape dict ─► model_cost.decode_gemv_list(shape, batch) ─► unique (M, K, N) with counts
        ─► harness.run_case("jax-jit", plain Y = X W) per unique shape ─► Σ count × device time
        ─► bounds.bound per shape (memory roof at batch 1) ─► Σ predicted
    run dir (summary.json / records.jsonl) ─► measured TPOT median ─► gap = measured − Σ GEMV
        (the gap is attention, norms, sampling, host and Python overhead: not a GEMV)

The shape dict is passed in (analysis never imports the server's presets).
"""
from __future__ import annotations

import dataclasses
import statistics
from collections import OrderedDict
from pathlib import Path
from typing import Optional

from analysis.contract.records import Records, as_records, read_records
from analysis.contract.rundir import read_json
from analysis.kernel import harness
from analysis.roofline import model_cost
from analysis.roofline import bounds


def unique_gemvs(shape: dict, batch: int) -> list[dict]:
    """decode_gemv_list grouped by (M, K, N): [{"names", "count", "M", "K", "N"}] in first-seen order."""
    groups: "OrderedDict[tuple, dict]" = OrderedDict()
    for name, m, k, n in model_cost.decode_gemv_list(shape, batch):
        g = groups.setdefault((m, k, n), {"names": [], "count": 0, "M": m, "K": k, "N": n})
        base = name.split(".", 1)[-1]
        if base not in g["names"]:
            g["names"].append(base)
        g["count"] += 1
    return list(groups.values())


def decode_study(shape: dict, batch: int, dtype: str, proto: harness.Protocol, spec_for,
                 context_len: Optional[int] = None, measured_step_ms: Optional[float] = None,
                 measured_source: str = "", path: str = "jax-jit", modules=None,
                 rotate_budget_bytes: int = 2 * 2**30) -> dict:
    """Time every distinct GEMV shape once (``proto`` repeats) and add them up per step.
    As in the engine, each call reads a different weight matrix: the harness cycles through up to
    ``count`` copies of W (within ``rotate_budget_bytes``), so small layers are not timed from cache."""
    sh = dict(shape, dtype=dtype, dtype_bytes=harness.ELEM_BYTES[dtype])
    items, total_meas, total_pred, spec_name, complete = [], 0.0, 0.0, None, True
    for g in unique_gemvs(sh, batch):
        case = harness.KernelCase(g["M"], g["K"], g["N"], dtype, bias_relu=False)
        w_bytes = g["K"] * g["N"] * harness.ELEM_BYTES[dtype]
        rot = max(1, min(g["count"], rotate_budget_bytes // max(1, w_bytes)))
        row = harness.run_case(path, case, dataclasses.replace(proto, rotate=rot), modules, spec_for)
        item = dict(g, bytes=case.min_bytes(), flops=case.flops(), status=row.status,
                    reason=row.reason, device=row.device, device_ms=row.device_ms,
                    first_ms=row.first_ms, bound_ms=row.bound_ms, binding=row.binding,
                    bound_fraction=row.bound_fraction, passed=row.passed,
                    max_abs_err=row.max_abs_err, spec=row.spec, w_copies=rot)
        items.append(item)
        if row.device_ms is None:
            total_meas = None
        elif total_meas is not None:
            total_meas += g["count"] * row.device_ms
        if row.bound_ms is None:
            complete = False
        else:
            total_pred += g["count"] * row.bound_ms
        spec_name = spec_name or row.spec or None
    ctx = context_len if context_len is not None else 1
    step_bytes = model_cost.decode_step_bytes(sh, batch, ctx)
    gemv_bytes = sum(i["count"] * i["bytes"] for i in items)
    out = {
        "model": sh.get("name"), "batch": batch, "dtype": dtype, "path": path,
        "context_len": ctx, "gemvs": items,
        "gemv_bytes_per_step": gemv_bytes, "decode_step_bytes": step_bytes,
        "decode_step_flops": model_cost.decode_step_flops(sh, batch, ctx),
        "predicted_gemv_ms": total_pred if complete and items else None,
        "predicted_evidence": "calculated (roofline bound from the spec: " + str(spec_name) + ")",
        "measured_gemv_ms": total_meas, "measured_evidence": "measured (kernel harness, device time)",
        "engine_step_ms": measured_step_ms, "engine_step_source": measured_source or None,
    }
    bw = None
    if items and items[0].get("spec"):
        bw = bounds.roofs(spec_for(*_kind_name(items[0]["device"])), dtype)[1]
    out["predicted_step_memory_ms"] = step_bytes / bw * 1e3 if bw else None
    if measured_step_ms is not None and total_meas is not None:
        out["gap_ms"] = measured_step_ms - total_meas
        out["gap_note"] = ("engine step minus the GEMV sum: attention over the KV cache, norms, "
                           "rotary, sampling, host and Python overhead, HTTP streaming")
        out["gemv_share"] = total_meas / measured_step_ms if measured_step_ms else None
    return out


def _kind_name(device: str) -> tuple[str, str]:
    kind, _, name = device.partition(": ")
    return kind, name


def _tpot_from_records(records: Records) -> list[float]:
    """Per request: (last token chunk − first token chunk) / (tokens after the first chunk), in ms."""
    records = as_records(records)
    out = []
    for r in records:
        if r.status != "ok" or (r.phase or "measured") != "measured":
            continue
        toks = [(t, n) for t, n in (r.chunks or []) if n > 0]
        after = sum(n for _, n in toks[1:])
        if len(toks) >= 2 and after > 0:
            out.append((toks[-1][0] - toks[0][0]) / after / 1e6)
    return out


def _find_tpot(d, trail=()) -> Optional[float]:
    """A TPOT median (ms) in a summary dict: a "tpot…" key holding a number or {median|p50}."""
    if not isinstance(d, dict):
        return None
    for k, v in d.items():
        if "tpot" in str(k).lower():
            if isinstance(v, dict):
                for key in ("median", "p50", "median_ms", "p50_ms"):
                    if isinstance(v.get(key), (int, float)):
                        return float(v[key]) * (1e3 if str(k).endswith("_s") else 1.0)
            elif isinstance(v, (int, float)) and "median" in str(k).lower():
                return float(v)
        found = _find_tpot(v, trail + (k,)) if isinstance(v, dict) else None
        if found is not None:
            return found
    return None


def measured_tpot_ms(run_dir: str | Path) -> tuple[Optional[float], str]:
    """The run's median TPOT in ms and where it came from: summary.json's tpot_ms p50 (the report's
    own figure) first, else computed from records.jsonl chunks."""
    run_dir = Path(run_dir)
    summ = run_dir / "summary.json"
    if summ.exists():
        found = read_json(summ)             # through analysis.contract
        v = _find_tpot(found) if found is not None else None
        if v is not None:
            return v, f"{summ}: TPOT p50"
    rec = run_dir / "records.jsonl"
    if rec.exists():
        vals = _tpot_from_records(read_records(rec))
        if vals:
            return statistics.median(vals), f"{rec}: median TPOT of {len(vals)} requests"
    return None, f"no TPOT found in {run_dir} (summary.json / records.jsonl)"
