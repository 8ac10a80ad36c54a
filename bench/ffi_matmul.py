"""XLA's dot against the FFI matmul kernel (servers/jax/kernels) on the engine's small-M shapes.

    per (layout, K, N) x M: best-of-R ms and weight GB/s (K*N*4 bytes / time) of
        xla: jax.jit(lambda x, w: x @ w)          (x @ e.T for the nt layout)
        ffi: jax.jit(kernels.dispatch.ffi_nn)     (ffi_nt)
    weights: copies totalling >= 64 MiB, rotated call after call (a decode step reads each weight
    from DRAM, not from the 32 MiB L3); the two programs alternate so a noisy neighbour hits both.
    Pinned to one CPU (--cpu, default the last one) before JAX starts, nice -5 when allowed; the
    load average is printed beside the numbers (this host is shared).

    .venv/bin/python -m bench.ffi_matmul [--ms 1,2,4,8,16,32,48,65,72,96] [--reps 7] [--cpu 1]
                                         [--no-pin --tag=-unpinned]   (XLA then uses every core)
                                         [--threads 1,2]  the kernel's threads per call, each raced
                                         against XLA's dot (default 0: as the CPU affinity allows)

Shapes: the `small` preset's (K=768: N=1280 wqkv, 768 wo, 4096 w13, 32000 lm_head; K=2048 N=768 w2),
a GPT-2-sized layer's (K=768: N=2304, 6144; K=3072 N=768) and a tied head (nt: e [50257, 768]). Writes bench/results/ffi_matmul-DATE.{txt,json};
ends with ONE JSON line. Evidence: measured.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SHAPES = [("nn", 768, 1280, "wqkv"), ("nn", 768, 768, "wo"), ("nn", 768, 4096, "w13"),      # the small
          ("nn", 2048, 768, "w2"), ("nn", 768, 32000, "lm_head"),                            # preset
          ("nn", 768, 2304, "wqkv-mha"), ("nn", 768, 6144, "w13-f3072"), ("nn", 3072, 768, "w2-f3072"),
          ("nt", 768, 50257, "embed.T (tied)")]   # a GPT-2-sized layer (12 KV heads, ffn 3072), tied head


def pin(cpu: int, enabled: bool = True) -> str:
    """Pin this process (and the threads JAX starts later) to one CPU; returns what was done."""
    done = []
    if enabled and hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1:
        cpu = cpu if cpu >= 0 else max(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        done.append(f"pinned to CPU {cpu}")
    try:
        os.nice(-5)
        done.append("nice -5")
    except OSError:
        done.append("nice unchanged")
    return ", ".join(done) or "not pinned"


def race_threads(fx, ff, set_threads, threads: list, x, ws: list, reps: int) -> dict:
    """Best seconds of XLA's dot ("xla") and of the kernel at each thread count (key: the count):
    all compiled first, then alternating call after call over the rotated weight copies (the
    method of servers/jax/kernels/autotune.race, with more than two contestants)."""
    import jax

    jax.block_until_ready((fx(x, ws[0]), ff(x, ws[0])))
    progs = [("xla", fx, None)] + [(t, ff, t) for t in threads]
    best = {name: float("inf") for name, _, _ in progs}
    i = 0
    for _ in range(reps):
        for name, f, t in progs:
            if t is not None:
                set_threads(t)
            w = ws[i % len(ws)]
            i += 1
            t0 = time.perf_counter()
            f(x, w).block_until_ready()
            best[name] = min(best[name], time.perf_counter() - t0)
    set_threads(0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ms", default="1,2,4,8,16,32,48,65,72,96", help="rows M (comma-separated)")
    ap.add_argument("--reps", type=int, default=7, help="repeats per program; the best is kept")
    ap.add_argument("--cpu", type=int, default=-1, help="CPU to pin to (default: the last one)")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave XLA every CPU (its dot is multi-threaded; the FFI kernel is not)")
    ap.add_argument("--tag", default="", help="suffix of the result files (e.g. -unpinned)")
    ap.add_argument("--shapes", default="", help="only shapes whose name contains one of these (comma)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--threads", default="0",
                    help="kernel threads per call, comma-separated (0: as the CPU affinity allows)")
    opt = ap.parse_args()
    try:
        threads = [int(t) for t in opt.threads.split(",")]
        assert all(0 <= t <= 64 for t in threads)
    except (ValueError, AssertionError):
        ap.error(f"--threads must be comma-separated counts 0..64, got {opt.threads!r}")
    how = pin(opt.cpu, not opt.no_pin)
    import jax
    import jax.numpy as jnp

    from servers.jax import kernels
    from servers.jax.kernels.dispatch import ffi_nn, ffi_nt, set_threads

    info = kernels.configure("ffi")
    if info["mode"] != "ffi":
        print(f"ffi_matmul: error: the FFI kernel is unavailable: {info['reason']}", file=sys.stderr)
        return 2
    ms = [int(m) for m in opt.ms.split(",")]
    want = [s for s in opt.shapes.split(",") if s]
    shapes = [s for s in SHAPES if not want or any(w in s[3] for w in want)]
    load0 = os.getloadavg()
    lines = [f"# ffi_matmul: jax {jax.__version__}, {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs, {how}; load average at start {load0[0]:.2f}",
             f"{'shape':26} {'M':>3} {'xla ms':>8} " + " ".join(f"{f'ffi{t}t ms':>9}" for t in threads)
             + f" {'xla GB/s':>8} " + " ".join(f"{f'ffi{t}t GB/s':>11}" for t in threads)
             + " " + " ".join(f"{f'x{t}t':>6}" for t in threads) + "  load"]
    print("\n".join(lines), flush=True)
    rows = []
    for layout, k, n, name in shapes:
        wshape = (k, n) if layout == "nn" else (n, k)
        nbytes = 4 * k * n
        copies = max(2, min(16, -(-(64 << 20) // nbytes)))
        ws = [jnp.full(wshape, 0.01 * (i + 1), jnp.float32) for i in range(copies)]
        fx = jax.jit((lambda a, b: a @ b) if layout == "nn" else (lambda a, b: a @ b.T))
        ff = jax.jit(ffi_nn if layout == "nn" else ffi_nt)
        for m in ms:
            x = jnp.full((m, k), 0.5, jnp.float32)
            best = race_threads(fx, ff, set_threads, threads, x, ws, opt.reps)
            load = os.getloadavg()[0]
            t0 = threads[0]
            r = {"layout": layout, "name": name, "M": m, "K": k, "N": n, "weight_bytes": nbytes,
                 "xla_ms": best["xla"] * 1e3, "ffi_ms": best[t0] * 1e3,
                 "xla_GBps": nbytes / best["xla"] / 1e9, "ffi_GBps": nbytes / best[t0] / 1e9,
                 "speedup": best["xla"] / best[t0], "load1": load,
                 "ffi_ms_by_threads": {str(t): best[t] * 1e3 for t in threads},
                 "speedup_by_threads": {str(t): best["xla"] / best[t] for t in threads}}
            rows.append(r)
            line = (f"{layout + ' ' + name + f' {k}x{n}':26} {m:3d} {r['xla_ms']:8.3f} "
                    + " ".join(f"{best[t] * 1e3:9.3f}" for t in threads) + f" {r['xla_GBps']:8.1f} "
                    + " ".join(f"{nbytes / best[t] / 1e9:11.1f}" for t in threads) + " "
                    + " ".join(f"{best['xla'] / best[t]:6.2f}" for t in threads) + f"  {load:.2f}")
            lines.append(line)
            print(line, flush=True)
        del ws
    load1 = os.getloadavg()
    lines.append(f"# load average at end {load1[0]:.2f}; best of {opt.reps} each, weights rotated over "
                 f">= 64 MiB; xNt = xla ms / ffi ms with N kernel threads (0: as the affinity allows)")
    print(lines[-1])
    result = {"bench": "ffi_matmul", "host": platform.node(), "cpus": os.cpu_count(), "jax": jax.__version__,
              "pinning": how, "reps": opt.reps, "threads": threads, "load_start": load0[0], "load_end": load1[0],
              "library": info["library"], "evidence": "measured", "rows": rows}
    stamp = time.strftime("%Y%m%d")
    out = Path(opt.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"ffi_matmul{opt.tag}-{stamp}.txt").write_text("\n".join(lines) + "\n")
    (out / f"ffi_matmul{opt.tag}-{stamp}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
