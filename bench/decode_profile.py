"""Where a decode step of the built-in JAX engine goes, operation by operation, against its floor.

    the engine's own weights (preset, fp32) ─► each piece jitted alone, all layers, median of N runs:
        wqkv / wo / w13 / w2 GEMVs ([B, K] @ [K, N], every layer)     floor = weight bytes / GEMV BW
        lm_head GEMV ([B, D] @ [D, V])                                 floor = bytes / GEMV BW
        the whole jitted decode step (engine._decode)                  floor = weights + KV bytes / GEMV BW
        the same step carrying a prompt piece (engine._fused, interleave_chunk rows): what a decode
          step costs while a new prompt is prefilled inside it
        the rest (attention, norms, RoPE, cache writes) = step - GEMVs floor = KV bytes / GEMV BW
          (calculated: attention alone, jitted outside the step, is not what the step runs)
        sampling (greedy, [B, V])
        engine.generate(): the step + sampling + the host work between steps (what the server runs)
    GEMV BW = XLA's own best [1, 4096] @ [4096, 8192] fp32 GEMV (134 MB of weights), or the FFI
    kernel's where --matmul is ffi/auto and it is faster: the rate a decode step could reach on this
    host; the copy bandwidth the reports use is printed beside it.

    .venv/bin/python -m bench.decode_profile [--preset small] [--batch 1,8] [--ctx 128] [--runs 30]
                                             [--matmul xla|ffi|auto]  (servers/jax/kernels; default xla)

Ends with ONE JSON line. Evidence: measured (floors calculated from the measured GEMV rate).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import jax
import jax.numpy as jnp
import numpy as np

from bench.decode_roofline import _best, measure_bandwidth


def gemv_bandwidth(runs: int, fn=None) -> float:
    """Best bytes/s of an fp32 GEMV (XLA's dot, or ``fn``) over a weight far larger than the caches."""
    w = jnp.asarray(np.random.default_rng(0).standard_normal((4096, 8192), np.float32))
    x = jnp.ones((1, 4096), jnp.float32)
    f = jax.jit(fn or (lambda a, b: a @ b))
    _, best = _best(lambda: f(x, w).block_until_ready(), runs)
    return w.nbytes / best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--matmul", choices=("xla", "ffi", "auto"), default="xla",
                    help="weight matmuls in the model and the GEMV rows (servers/jax/kernels)")
    opt = ap.parse_args()
    from servers.jax import build
    from servers.jax.sampling import greedy

    batches = [int(b) for b in opt.batch.split(",")]
    engine, _, _ = build(opt.preset, dtype="fp32", slots=max(batches), max_model_len=512, warmup=False)
    from servers.jax import kernels
    mm = kernels.configure(opt.matmul)                 # before anything is traced
    a, p = engine.args, engine.params
    gbw = gemv_bandwidth(opt.runs)
    if mm["mode"] != "xla":          # the kernel may read faster than XLA's dot: the roof is the faster
        from servers.jax.kernels.dispatch import ffi_nn
        gbw = max(gbw, gemv_bandwidth(opt.runs, ffi_nn))
    copy = measure_bandwidth(n=5)["numpy_copy_GBps"] * 1e9
    print(f"# {opt.preset}: {a.n_params() / 1e6:.1f}M params fp32, {os.cpu_count()} CPUs, jax {jax.__version__}")
    print(f"# GEMV bandwidth (best of XLA / kernel, 134 MB fp32 weight): {gbw / 1e9:.1f} GB/s; copy (read+write): "
          f"{copy / 1e9:.1f} GB/s   [measured]")
    result = {"bench": "decode_profile", "preset": opt.preset, "ctx": opt.ctx, "host": platform.node(),
              "cpus": os.cpu_count(), "gemv_GBps": gbw / 1e9, "copy_GBps": copy / 1e9,
              "evidence": "measured; floors calculated from the measured GEMV bandwidth", "batches": {},
              "matmul": mm["mode"], "matmul_reason": mm["reason"], "load1": os.getloadavg()[0]}
    print(f"# matmul: {mm['mode']}{' (' + mm['reason'] + ')' if mm['reason'] else ''}; "
          f"load average {os.getloadavg()[0]:.2f}")
    L = p["layers"]
    for b in batches:
        x = jnp.ones((b, a.dim), jnp.float32)
        rows = []

        def piece(name, fn, args, nbytes):
            f = jax.jit(fn)
            med, mn = _best(lambda: jax.block_until_ready(f(*args)), opt.runs)
            rows.append({"op": name, "median_ms": med * 1e3, "min_ms": mn * 1e3,
                         "floor_ms": nbytes / gbw * 1e3, "bytes": nbytes})

        for key, k_in in (("wqkv", a.dim), ("wo", a.q_dim), ("w13", a.dim), ("w2", a.ffn_dim)):
            ws = [lp[key] for lp in L]
            xin = jnp.ones((b, k_in), jnp.float32)
            # sum of every layer's product: one read of each weight, nothing elided
            piece(f"{key} x{len(ws)}", lambda v, *w: sum(jnp.sum(kernels.matmul(v, wi)) for wi in w), (xin, *ws),
                  sum(w.nbytes for w in ws))
        if "lm_head" in p:
            piece("lm_head", kernels.matmul, (x, p["lm_head"]), p["lm_head"].nbytes)
        else:
            piece("lm_head", kernels.matmul_t, (x, p["embed"]), p["embed"].nbytes)
        engine.active[:] = False
        engine.active[:b] = True
        engine.pos[:b] = opt.ctx
        attn = engine.attn_bucket()
        kv_bytes = 2 * a.n_layers * b * a.n_kv_heads * attn * a.head_dim * 4
        logits = jnp.ones((b, a.vocab_size), jnp.float32)
        piece("sampling (greedy)", greedy, (logits,), logits.nbytes)
        bb = engine.batch_bucket()
        toks = np.zeros(bb, np.int32)

        def step():
            engine.pos[:b] = opt.ctx
            lg, engine.cache = engine._decode(engine.params, engine.cache, toks.copy(),
                                              engine.pos[:bb].copy(), attn)
            lg.block_until_ready()
        step()
        med, mn = _best(step, opt.runs)
        weights = sum(r["bytes"] for r in rows[:5])
        gemv_ms = sum(r["median_ms"] for r in rows[:5])
        rows.append({"op": "rest: attention, norms, RoPE, cache writes", "median_ms": med * 1e3 - gemv_ms,
                     "min_ms": None, "floor_ms": kv_bytes / gbw * 1e3, "bytes": kv_bytes,
                     "calculated": "whole step - the five GEMV rows"})
        rows.append({"op": "decode step (jitted, whole)", "median_ms": med * 1e3, "min_ms": mn * 1e3,
                     "floor_ms": (weights + kv_bytes) / gbw * 1e3, "bytes": weights + kv_bytes})

        c = engine.interleave_chunk
        if c:                  # the same step carrying a prompt piece (fused prefill), as served
            cattn = max(attn, next(x for x in engine.attn_buckets if x >= c))
            ctoks, cslot = np.ones(c, np.int32), np.int32(engine.slots - 1)

            def fused():
                engine.pos[:b] = opt.ctx
                lg, _, engine.cache = engine._fused(engine.params, engine.cache, toks.copy(),
                                                    engine.pos[:bb].copy(), ctoks, cslot, np.int32(0), cattn)
                lg.block_until_ready()
            fused()
            fmed, fmn = _best(fused, opt.runs)
            rows.append({"op": f"decode step + {c}-token prompt piece (fused)", "median_ms": fmed * 1e3,
                         "min_ms": fmn * 1e3, "floor_ms": (weights + kv_bytes) / gbw * 1e3,
                         "bytes": weights + kv_bytes})

        def gen():
            engine.pos[:b] = opt.ctx
            engine.generate()
        gen()
        med, mn = _best(gen, opt.runs)
        rows.append({"op": "engine.generate() (step + sampling + host)", "median_ms": med * 1e3,
                     "min_ms": mn * 1e3, "floor_ms": (weights + kv_bytes) / gbw * 1e3,
                     "bytes": weights + kv_bytes})
        engine.active[:] = False
        print(f"\n## batch {b} (engine batch bucket {bb}), context {opt.ctx}")
        print(f"{'operation':44} {'median ms':>9} {'min ms':>7} {'floor ms':>8} {'floor/median':>12}")
        for r in rows:
            r["of_floor"] = r["floor_ms"] / r["median_ms"] if r["median_ms"] > 0 else None
            mn_s = "" if r["min_ms"] is None else f"{r['min_ms']:7.2f}"
            of = "" if r["of_floor"] is None else f"{r['of_floor']:12.2f}"
            print(f"{r['op']:44} {r['median_ms']:9.2f} {mn_s:>7} {r['floor_ms']:8.2f} {of:>12}")
        result["batches"][str(b)] = rows
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
