"""`--matmul auto`: time XLA's dot against the FFI kernel once per (layout, M, K, N), keep the faster.

Why timing at warm-up rather than a committed table: which one wins depends on the host (core
count XLA's dot may use, memory bandwidth, AVX2 vs AVX-512), so a table measured on one VM is
wrong on the next; the timing costs ~0.05-0.5 s per shape, once, during the warm-up that compiles
the same shapes anyway, and every decision is shown with its timings in /info.

Method: weight copies whose total exceeds the last-level cache (>= 64 MiB, as the model's layers
do: a decode step reads every weight once, from DRAM; a single weight that large is used alone),
rotated call after call; the two programs alternate (so a noisy neighbour hits both alike); best
of REPS each. Where the kernel would split the shape over threads (the CPU affinity allows more
than one), the split kernel is also raced against the same kernel on one thread, and the call
site keeps one thread (the FFI call's `threads` attribute) if that was faster: on a busy host the
second core may cost more than it reads. The FFI kernel is kept only if it beats XLA by more than
MARGIN: when the two are within noise, XLA (the default) stays. Measured on the small preset: 68 shapes, 11 s in all. The
timing runs in its own thread: the caller is usually inside a jit trace, where JAX would stage
these calls instead of running them.
"""
from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp

from .ffi import ffi_nn, ffi_nt

REPS = 5
MARGIN = 0.03
ROTATE_BYTES = 64 << 20
MAX_COPIES = 16


def race(fx, ff, x, ws: list, reps: int) -> dict:
    """Best seconds of ``fx(x, w)`` ("xla") and ``ff(x, w)`` ("ffi"): both compiled first, then
    alternating call after call over the weight copies ``ws`` in rotation, best of ``reps`` each
    (also bench/ffi_matmul.py's method)."""
    jax.block_until_ready((fx(x, ws[0]), ff(x, ws[0])))      # compile both
    best = {"xla": float("inf"), "ffi": float("inf")}
    i = 0
    for _ in range(reps):
        for name, f in (("xla", fx), ("ffi", ff)):
            w = ws[i % len(ws)]
            i += 1
            t0 = time.perf_counter()
            f(x, w).block_until_ready()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def _measure(layout: str, m: int, k: int, n: int) -> dict:
    t_start = time.perf_counter()

    wshape = (k, n) if layout == "nn" else (n, k)
    nbytes = 4 * k * n
    # one copy when it alone outgrows the L3 (a 1 GB tied head must not be allocated twice)
    copies = 1 if nbytes >= ROTATE_BYTES else min(MAX_COPIES, -(-ROTATE_BYTES // nbytes))
    ws = [jnp.full(wshape, 0.01 * (i + 1), jnp.float32) for i in range(copies)]
    x = jnp.full((m, k), 0.5, jnp.float32)
    kern = ffi_nn if layout == "nn" else ffi_nt
    fx = jax.jit((lambda a, b: a @ b) if layout == "nn" else (lambda a, b: a @ b.T))
    ff = jax.jit(kern)                                     # the process's thread policy
    best = race(fx, ff, x, ws, REPS)
    threads = 0
    if _lib_threads(layout, m, k, n) > 1:                  # it would split: is one thread faster here?
        one = race(ff, jax.jit(lambda a, b: kern(a, b, 1)), x, ws, REPS)
        if one["ffi"] < min(best["ffi"], one["xla"]):
            threads, best["ffi_1t"] = 1, one["ffi"]
    fbest = best["ffi_1t"] if threads == 1 else best["ffi"]
    use = "ffi" if fbest < best["xla"] * (1 - MARGIN) else "xla"
    out = {"use": use, "xla_ms": round(best["xla"] * 1e3, 4), "ffi_ms": round(fbest * 1e3, 4),
           "weight_GBps_xla": round(nbytes / best["xla"] / 1e9, 2),
           "weight_GBps_ffi": round(nbytes / fbest / 1e9, 2),
           "tune_s": round(time.perf_counter() - t_start, 3)}
    if use == "ffi":
        out["threads"] = threads
    return out


def _lib_threads(layout: str, m: int, k: int, n: int) -> int:
    """Threads the kernel's policy gives this shape (2 pool threads assumed: the affinity decides)."""
    from .build import loaded_lib

    lib = loaded_lib()
    return lib.lg_threads_for(m, k, n, 2) if lib is not None else 1


def time_both(layout: str, m: int, k: int, n: int) -> dict:
    """{"use": "ffi" | "xla", "xla_ms", "ffi_ms", ...}; a failure of the timing keeps XLA."""
    box: dict = {}

    def run() -> None:
        try:
            box["r"] = _measure(layout, m, k, n)
        except Exception as e:  # noqa: BLE001 - a timing failure must never break serving
            box["r"] = {"use": "xla", "error": f"{type(e).__name__}: {e}"[:200]}

    t = threading.Thread(target=run, name="matmul-autotune")
    t.start()
    t.join()
    return box["r"]
