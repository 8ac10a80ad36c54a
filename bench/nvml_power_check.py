"""Check the NVML energy path on a GPU machine: counter vs. integrated instant power under a matmul load.

    python -m bench.nvml_power_check [--gpu 0] [--idle 3] [--load 10] [--size 8192]

Steps: probe how often nvmlDeviceGetTotalEnergyConsumption changes (polled at ~1 kHz for 1 s);
idle baseline; a bf16 matmul loop on CUDA (torch, else jax) between measure_start/measure_end
marks through loadgen.power (NVML source at 10 Hz); then window energy from the counter vs. the
trapezoid of NVML_FI_DEV_POWER_INSTANT samples. Prints a table and ends with ONE JSON line; the
run directory (power.jsonl, power_sources.json, result.json) goes under $OUT if set, else
bench/results/. Without a GPU it prints "unavailable: <reason>" and exits 0.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path



def unavailable(reason: str) -> int:
    print(f"unavailable: {reason}")
    print(json.dumps({"bench": "nvml_power_check", "status": "unavailable", "reason": reason}))
    return 0


def probe_counter_period(nv, h, seconds=1.0) -> dict:
    """Poll the energy counter as fast as possible; the spacing of changes is its update period."""
    changes, last, polls = [], None, 0
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        v = nv.nvmlDeviceGetTotalEnergyConsumption(h)
        polls += 1
        if last is not None and v != last:
            changes.append(time.perf_counter())
        last = v
        time.sleep(0.001)
    gaps = [b - a for a, b in zip(changes, changes[1:])]
    gaps.sort()
    return {"polls": polls, "changes": len(changes),
            "update_period_ms": 1000 * gaps[len(gaps) // 2] if gaps else None}


def matmul_loop(seconds: float, size: int, gpu: int) -> str:
    try:
        import torch
        if torch.cuda.is_available():
            dev = torch.device(f"cuda:{gpu}")
            a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)  # [size, size]
            b = torch.randn(size, size, device=dev, dtype=torch.bfloat16)  # [size, size]
            t_end = time.perf_counter() + seconds
            n = 0
            while time.perf_counter() < t_end:
                for _ in range(8):
                    c = a @ b                                               # [size, size]
                torch.cuda.synchronize(dev)
                n += 8
            del c
            return f"torch {torch.__version__}: {n} matmuls {size}^3 bf16"
    except ImportError:
        pass
    import jax
    import jax.numpy as jnp
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        raise RuntimeError("neither torch nor jax sees a CUDA device")
    k = jax.random.PRNGKey(0)
    a = jax.device_put(jax.random.normal(k, (size, size), jnp.bfloat16), gpus[gpu])  # [size, size]
    f = jax.jit(lambda x: x @ x)
    t_end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < t_end:
        f(a).block_until_ready()
        n += 1
    return f"jax {jax.__version__}: {n} matmuls {size}^3 bf16"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--idle", type=float, default=3.0)
    ap.add_argument("--load", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=8192)
    args = ap.parse_args()
    try:
        import pynvml as nv
    except ImportError:
        return unavailable("nvidia-ml-py is not installed")
    try:
        nv.nvmlInit()
    except nv.NVMLError as e:
        return unavailable(f"nvmlInit failed: {e}")
    h = nv.nvmlDeviceGetHandleByIndex(args.gpu)
    name = nv.nvmlDeviceGetName(h)
    probe = probe_counter_period(nv, h)
    nv.nvmlShutdown()

    from analysis.energy.window import energy_summary, load_power
    from analysis.energy.series import trapezoid_j, window_power_samples
    from loadgen import power
    from loadgen.scenario.model import Power

    base = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    run = base / f"nvml_power_check-{time.strftime('%Y%m%d-%H%M%S')}"
    s = power.start(Power(sources=["nvml"], gpu_indices=[args.gpu], sample_hz=10,
                          idle_baseline_s=args.idle), run)
    s.idle_baseline()
    s.mark("measure_start")
    try:
        what = matmul_loop(args.load, args.size, args.gpu)
    except Exception as e:
        s.stop()
        return unavailable(f"GPU load failed: {type(e).__name__}: {e}")
    s.mark("measure_end")
    out = s.stop()
    rows, sources = load_power(run)
    e = energy_summary(rows, [], None, sources)
    start, end = e["window"]["start_ns"], e["window"]["end_ns"]
    pw = [r for r in rows if r["kind"] == "power_w"]
    integ = trapezoid_j(*window_power_samples([r["t_ns"] for r in pw], [r["value"] for r in pw],
                                              start, end))
    counter = e["energy_j"]
    src = out["sources"][0]
    result = {"bench": "nvml_power_check", "status": e["status"], "gpu": name, "load": what,
              "window_s": e["window"]["duration_s"], "counter_j": counter,
              "integrated_instant_j": integ,
              "counter_over_integrated": counter / integ if counter and integ else None,
              "avg_power_w": e["avg_power_w"],
              "idle_power_w": (e.get("above_idle") or {}).get("idle_power_w"),
              "counter_update_period_ms": probe["update_period_ms"],
              "counter_probe": probe, "achieved_hz": src.get("achieved_hz"),
              "power_field": [d.get("power_field") for d in src.get("devices", [])],
              "warnings": e["warnings"], "run_dir": str(run)}
    (run / "result.json").write_text(json.dumps(result, indent=1))
    print(f"{'figure':32} value")
    for k in ("gpu", "load", "window_s", "counter_j", "integrated_instant_j",
              "counter_over_integrated", "avg_power_w", "idle_power_w",
              "counter_update_period_ms", "achieved_hz"):
        v = result[k]
        print(f"{k:32} {v:.3f}" if isinstance(v, float) else f"{k:32} {v}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
