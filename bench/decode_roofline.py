"""Decode/prefill roofline of the built-in JAX engine on this machine (in-process, no HTTP).

    measure bandwidth (large array copy: bytes read + written)  ──┐
    measure matmul rate (fp32 GEMM, a few shapes; the best is the peak) ──┤
    engine (preset, fp32) ─► decode step at batch 1, 2, 4, … 64  ─────────┼─► bound = max(FLOPs/peak,
                          ─► prefill of 128 and 512 prompt tokens ────────┘   bytes/bandwidth)
                                                                             MBU (decode), MFU (prefill)

bytes per decode step = weights read (every matrix; one embedding row per sequence unless the
head is tied) + KV cache read at the context length (the engine actually reads its attention
bucket, printed as attn_len). Peaks (bandwidth, matmul rate) are the best of several runs; step
times are medians (min also printed, and the JSON has MBU/MFU of both): this machine is shared,
so the numbers are noisy. Prompts longer than the engine's prefill_chunk (256) are prefilled in
chunks, as when serving. Everything printed is "measured" on this host except the
bounds, which are "calculated" from the measured peaks.

    .venv/bin/python -m bench.decode_roofline [--preset small] [--ctx 128] [--steps 20] [--out DIR]

Ends with ONE JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def _best(f, n: int) -> tuple[float, float]:
    """(median, min) seconds of f() over n runs after one warm-up run."""
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), float(np.min(ts))


def measure_bandwidth(mib: int = 256, n: int = 8) -> dict:
    """Large-array traffic, best of n runs, fp32, mib MiB:
    * numpy_copy: src → dst (np.copyto), bytes = read + written. The headline peak (the copy
      measurement the project's MBU figures use);
    * xla_inplace: x * 1.0001 into the donated x (in place; a fresh 256 MiB output would time
      page faults), bytes = read + written;
    * xla_read: sum(x), read only (the traffic of a GEMV).
    MBU against the other two is reported beside the headline."""
    a = np.ones(mib * 2**20 // 4, np.float32)
    b = np.empty_like(a)
    _, min_np = _best(lambda: np.copyto(b, a), n)       # peaks use the best run
    f = jax.jit(lambda v: v * 1.0001, donate_argnums=0)
    box = [jnp.asarray(a)]

    def xla_inplace() -> None:
        box[0] = f(box[0])
        box[0].block_until_ready()
    _, min_x = _best(xla_inplace, n)
    s = jax.jit(jnp.sum)
    _, min_r = _best(lambda: s(box[0]).block_until_ready(), n)
    nbytes = 2 * a.nbytes
    out = {"numpy_copy_GBps": nbytes / min_np / 1e9, "xla_inplace_GBps": nbytes / min_x / 1e9,
           "xla_read_GBps": a.nbytes / min_r / 1e9, "array_MiB": mib}
    out["peak_GBps"] = out["numpy_copy_GBps"]
    return out


def measure_matmul(n: int = 8) -> dict:
    rates = {}
    for m, k, nn in ((32, 768, 2048), (512, 768, 2048), (2048, 2048, 2048)):
        x = jnp.asarray(np.random.default_rng(0).standard_normal((m, k), np.float32))
        w = jnp.asarray(np.random.default_rng(1).standard_normal((k, nn), np.float32))
        f = jax.jit(lambda a, b: a @ b)
        _, best = _best(lambda: f(x, w).block_until_ready(), n)
        rates[f"{m}x{k}x{nn}"] = 2 * m * k * nn / best / 1e9
    return {"GFLOPs": rates, "peak_GFLOPs": max(rates.values())}


def decode_cost(a, batch: int, ctx: int, bpe: int) -> tuple[float, float]:
    """(FLOPs, bytes) of one decode step: matmuls + attention; weights + KV at ctx."""
    d, q, kv, f, v, L = a.dim, a.q_dim, a.kv_dim, a.ffn_dim, a.vocab_size, a.n_layers
    mat = L * (d * (q + 2 * kv) + q * d + 3 * d * f) + d * v          # every matmul weight
    flops = 2 * mat * batch + 4 * batch * ctx * L * a.n_heads * a.head_dim
    weights = mat + L * 2 * d + d + (0 if a.tied_embeddings else batch * d)
    kv_bytes = 2 * L * kv * ctx * batch
    return flops, (weights + kv_bytes) * bpe


def prefill_cost(a, n: int, bpe: int) -> tuple[float, float]:
    d, q, kv, f, L = a.dim, a.q_dim, a.kv_dim, a.ffn_dim, a.n_layers
    mat = L * (d * (q + 2 * kv) + q * d + 3 * d * f)
    flops = 2 * mat * n + 2 * d * a.vocab_size + 2 * n * n * L * a.n_heads * a.head_dim  # causal
    return flops, (mat + d * a.vocab_size + 2 * L * kv * n) * bpe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--ctx", type=int, default=128, help="context length of every decoding slot")
    ap.add_argument("--batches", default="1,2,4,8,16,32,64")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--out", default=None, help="directory for a JSON result file (e.g. bench/results)")
    opt = ap.parse_args()
    batches = [int(x) for x in opt.batches.split(",")]

    from servers.jax import build

    bw = measure_bandwidth()
    mm = measure_matmul()
    peak_bw, peak_fl = bw["peak_GBps"] * 1e9, mm["peak_GFLOPs"] * 1e9
    t0 = time.perf_counter()
    engine, _, info = build(opt.preset, dtype="fp32", slots=max(batches),
                            max_model_len=opt.max_model_len, warmup=False)
    a, bpe = engine.args, 4
    print(f"# {opt.preset}: {a.n_params() / 1e6:.1f}M params fp32, jax {jax.__version__} "
          f"{jax.default_backend()} ({jax.devices()[0].device_kind}), {os.cpu_count()} CPUs")
    print(f"# bandwidth ({bw['array_MiB']} MiB fp32): copy src->dst {bw['numpy_copy_GBps']:.1f} GB/s "
          f"(read+write; the peak used), XLA in-place {bw['xla_inplace_GBps']:.1f} GB/s (read+write), "
          f"XLA read-only {bw['xla_read_GBps']:.1f} GB/s   [measured]")
    print("# matmul fp32: " + ", ".join(f"{k} {v:.0f}" for k, v in mm["GFLOPs"].items())
          + f" GFLOP/s -> peak {mm['peak_GFLOPs']:.0f}   [measured]")

    rows = []
    print(f"\n{'phase':8} {'batch/n':>7} {'attn':>5} {'median ms':>10} {'min ms':>8} {'bound ms':>9} "
          f"{'tok/s':>8} {'GB/s':>6} {'GFLOP/s':>8} {'MBU':>5} {'MFU':>5}")
    for b in batches:
        engine.active[:] = False
        engine.active[:b] = True
        engine.pos[:b] = opt.ctx
        attn = engine.attn_bucket()
        eb = engine.batch_bucket()

        def step():
            engine.pos[:b] = opt.ctx
            engine.generate()
        step()                                                     # compile this (B, attn) step
        med, mn = _best(step, opt.steps)
        flops, nbytes = decode_cost(a, b, opt.ctx, bpe)
        bound = max(flops / peak_fl, nbytes / peak_bw)
        r = {"phase": "decode", "batch": b, "engine_batch": eb, "attn_len": attn, "ctx": opt.ctx,
             "median_ms": med * 1e3, "min_ms": mn * 1e3, "bound_ms": bound * 1e3,
             "tok_s": b / med, "GBps": nbytes / med / 1e9, "GFLOPs": flops / med / 1e9,
             "mbu": nbytes / med / peak_bw, "mfu": flops / med / peak_fl,
             "mbu_best": nbytes / mn / peak_bw,
             "mbu_vs_read": nbytes / med / (bw["xla_read_GBps"] * 1e9),
             "mbu_vs_inplace": nbytes / med / (bw["xla_inplace_GBps"] * 1e9)}
        rows.append(r)
        print(f"{'decode':8} {b:7d} {attn:5d} {r['median_ms']:10.2f} {r['min_ms']:8.2f} {r['bound_ms']:9.2f} "
              f"{r['tok_s']:8.1f} {r['GBps']:6.1f} {r['GFLOPs']:8.1f} {r['mbu']:5.2f} {r['mfu']:5.2f}")
    engine.active[:] = False
    engine.pos[:] = 0
    for n in (128, 512):
        if n >= engine.max_model_len:
            continue
        ids = list(np.random.default_rng(n).integers(0, a.vocab_size, n))

        def pre():
            p = engine.prefill(ids, None)                          # int(first_token) syncs
            engine.insert(p, 0)
        med, mn = _best(pre, max(3, opt.steps // 4))
        flops, nbytes = prefill_cost(a, n, bpe)
        bound = max(flops / peak_fl, nbytes / peak_bw)
        r = {"phase": "prefill", "tokens": n, "median_ms": med * 1e3, "min_ms": mn * 1e3,
             "bound_ms": bound * 1e3, "tok_s": n / med, "GBps": nbytes / med / 1e9,
             "GFLOPs": flops / med / 1e9, "mbu": nbytes / med / peak_bw, "mfu": flops / med / peak_fl,
             "mfu_best": flops / mn / peak_fl}
        rows.append(r)
        print(f"{'prefill':8} {n:7d} {'':5} {r['median_ms']:10.2f} {r['min_ms']:8.2f} {r['bound_ms']:9.2f} "
              f"{r['tok_s']:8.1f} {r['GBps']:6.1f} {r['GFLOPs']:8.1f} {r['mbu']:5.2f} {r['mfu']:5.2f}")
    # peaks again at the end (the machine is shared): keep the better of the two measurements,
    # and recompute every fraction against the final peaks
    bw2, mm2 = measure_bandwidth(), measure_matmul()
    for k in ("numpy_copy_GBps", "xla_inplace_GBps", "xla_read_GBps", "peak_GBps"):
        bw[k] = max(bw[k], bw2[k])
    for k, v in mm2["GFLOPs"].items():
        mm["GFLOPs"][k] = max(mm["GFLOPs"][k], v)
    mm["peak_GFLOPs"] = max(mm["GFLOPs"].values())
    f_bw, f_fl = peak_bw / (bw["peak_GBps"] * 1e9), peak_fl / (mm["peak_GFLOPs"] * 1e9)
    for r in rows:
        for k in ("mbu", "mbu_best"):
            if k in r:
                r[k] *= f_bw
        for k in ("mfu", "mfu_best"):
            if k in r:
                r[k] *= f_fl
        if "mbu_vs_read" in r:
            r["mbu_vs_read"] = r["GBps"] / bw["xla_read_GBps"]
            r["mbu_vs_inplace"] = r["GBps"] / bw["xla_inplace_GBps"]
        # GFLOPs·ms / peak GFLOP/s = FLOPs / peak, in ms (likewise bytes / bandwidth)
        r["bound_ms"] = max(r["GFLOPs"] * r["median_ms"] / mm["peak_GFLOPs"],
                            r["GBps"] * r["median_ms"] / bw["peak_GBps"])
    print(f"# peaks re-measured at the end; best of both: copy {bw['peak_GBps']:.1f} GB/s (in-place "
          f"{bw['xla_inplace_GBps']:.1f}, read-only {bw['xla_read_GBps']:.1f}), matmul "
          f"{mm['peak_GFLOPs']:.0f} GFLOP/s. Final fractions:")
    for r in rows:
        what = f"decode b{r['batch']}" if r["phase"] == "decode" else f"prefill {r['tokens']}"
        print(f"#   {what:12} bound {r['bound_ms']:7.2f} ms  MBU {r['mbu']:.2f}  MFU {r['mfu']:.2f}")
    dec = {r["batch"]: r for r in rows if r["phase"] == "decode"}
    ratio = (dec[32]["tok_s"] / dec[1]["tok_s"]) if 1 in dec and 32 in dec else None
    print(f"\n# batch-1 MBU {dec[1]['mbu']:.2f} median step, {dec[1]['mbu_best']:.2f} best step "
          f"(goal >= 0.70); median step against read-only {dec[1]['mbu_vs_read']:.2f}, "
          f"against in-place {dec[1]['mbu_vs_inplace']:.2f}"
          if 1 in dec else "# no batch-1 row")
    if ratio is not None:
        print(f"# throughput batch 32 / batch 1 = {ratio:.1f}x (goal >= 8x)")
    result = {"bench": "decode_roofline", "preset": opt.preset, "dtype": "fp32", "ctx": opt.ctx,
              "host": platform.node(), "cpus": os.cpu_count(), "jax": jax.__version__,
              "backend": jax.default_backend(), "bandwidth": bw, "matmul": mm,
              "evidence": "measured (bounds calculated from measured peaks)",
              "batch1_mbu": dec[1]["mbu"] if 1 in dec else None, "b32_over_b1": ratio,
              "build_s": time.perf_counter() - t0, "rows": rows,
              "unix_time": int(time.time())}
    if opt.out:
        d = Path(opt.out)
        d.mkdir(parents=True, exist_ok=True)
        (d / f"decode_roofline-{opt.preset}-{result['unix_time']}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
