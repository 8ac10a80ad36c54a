"""The probes ``loadgen calibrate`` times (analysis/roofline/calibrate.py puts them together).

    measure_read(backend, nbytes)   y = A @ ones, A [rows, READ_COLS] fp32 (read_shape): bytes of
                                    A / median time — the read bandwidth, the roof of weight reads
    measure_copy(backend, nbytes)   dst[:] = src: 2 × nbytes / median time (read + write)
    measure_matmul(backend, n, dt)  C = A @ B: 2 n^3 / median time
        each ─► {"bytes_per_s" | "flops_per_s", "median_s", "runs", "backend", "spread",
                 "method"}  (the median of ``repeats`` runs after one warm-up; host_load.spread)

Backends: "numpy" (CPU), "torch" (CUDA: events; TF32 off for fp32), "torch-cpu", "jax" (JAX's
default device; results block_until_ready). Achieved rates, not theoretical peaks.
"""
from __future__ import annotations

import importlib
import statistics
import time
from typing import Callable

import numpy as np

from analysis.roofline import host_load


def _median_time(run: Callable[[], float], repeats: int, budget_s: float) -> tuple[float, list]:
    """(median, every time) of run() (each returns seconds) after one warm-up; stops early
    past budget_s."""
    run()
    times, t_end = [], time.perf_counter() + budget_s
    for _ in range(repeats):
        times.append(run())
        if time.perf_counter() > t_end and len(times) >= 3:
            break
    return statistics.median(times), times


def _wall(fn: Callable[[], object], sync: Callable[[object], None] = lambda r: None) -> float:
    t0 = time.perf_counter()
    sync(fn())
    return time.perf_counter() - t0


def _cuda_timer(torch):
    def timed(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    return timed


def measure_copy(backend: str, nbytes: int, repeats: int, budget_s: float = 20.0) -> dict:
    """Copy bandwidth = 2 * nbytes / median time (read src + write dst)."""
    n = nbytes // 4
    if backend == "numpy":
        src = np.random.default_rng(0).random(n, dtype=np.float32)   # [n] fp32, never zeros
        dst = np.empty_like(src)
        t, times = _median_time(lambda: _wall(lambda: np.copyto(dst, src)), repeats, budget_s)
    elif backend == "torch":
        torch = importlib.import_module("torch")
        src = torch.rand(n, device="cuda")
        dst = torch.empty_like(src)
        timed = _cuda_timer(torch)
        t, times = _median_time(lambda: timed(lambda: dst.copy_(src)), repeats, budget_s)
    elif backend == "jax":
        jax = importlib.import_module("jax")
        src = jax.random.uniform(jax.random.PRNGKey(0), (n,))
        copy = jax.jit(lambda x: x * 1.0)                            # new buffer: read + write
        t, times = _median_time(lambda: _wall(lambda: copy(src), lambda r: r.block_until_ready()),
                            repeats, budget_s)
    else:
        raise ValueError(f"unknown copy backend {backend!r}")
    k = len(times)
    return {"bytes_per_s": 2 * nbytes / t, "median_s": t, "runs": k, "backend": backend,
            "spread": host_load.spread(times),
            "method": f"{backend} copy of {nbytes / 2**20:.0f} MiB, counted read + write, "
                      f"median of {k} after 1 warm-up"}


_JIT: dict = {}            # jax.jit'ed probes, kept: a second calibration does not compile again
READ_COLS = 4096           # the GEMV's row length: A [nbytes / 4 / READ_COLS, READ_COLS] fp32


def read_shape(nbytes: int) -> tuple[int, int]:
    """(rows, cols) of the fp32 matrix the read probe streams: as near ``nbytes`` as whole rows
    of READ_COLS allow (one row of all of it when smaller)."""
    n = max(1, nbytes // 4)
    cols = min(READ_COLS, n)
    return n // cols, cols


def measure_read(backend: str, nbytes: int, repeats: int, budget_s: float = 20.0) -> dict:
    """Read bandwidth = bytes of A / median time of y = A @ ones (a GEMV: every byte of A read
    once; the vector and y, under 0.1 % of it, are not counted): what a decode step's weight
    reads get, which a copy (read + write) understates on some CPUs."""
    rows, cols = read_shape(nbytes)
    read = rows * cols * 4
    if backend == "numpy":
        a = np.random.default_rng(0).random((rows, cols), dtype=np.float32)   # never zeros
        v = np.ones(cols, dtype=np.float32)
        t, times = _median_time(lambda: _wall(lambda: a @ v), repeats, budget_s)
    elif backend in ("torch", "torch-cpu"):
        torch = importlib.import_module("torch")
        dev = "cuda" if backend == "torch" else "cpu"
        a = torch.rand(rows, cols, device=dev)
        v = torch.ones(cols, device=dev)
        timed = _cuda_timer(torch) if dev == "cuda" else _wall
        t, times = _median_time(lambda: timed(lambda: a @ v), repeats, budget_s)
    elif backend == "jax":
        jax = importlib.import_module("jax")
        a = jax.random.uniform(jax.random.PRNGKey(0), (rows, cols))
        v = jax.numpy.ones(cols)
        gemv = _JIT.setdefault("gemv", jax.jit(lambda x, y: x @ y))   # compiled once a process
        t, times = _median_time(lambda: _wall(lambda: gemv(a, v),
                                              lambda r: r.block_until_ready()), repeats, budget_s)
    else:
        raise ValueError(f"unknown read backend {backend!r}")
    k = len(times)
    return {"bytes_per_s": read / t, "bytes": read, "median_s": t, "runs": k, "backend": backend,
            "spread": host_load.spread(times),
            "method": f"{backend} read: GEMV y = A @ ones, A [{rows}, {cols}] fp32 "
                      f"({read / 2**20:.0f} MiB), counted bytes read, median of {k} after 1 "
                      "warm-up"}


def measure_matmul(backend: str, n: int, dtype: str, repeats: int, budget_s: float = 30.0) -> dict:
    """Matmul rate = 2 n^3 / median time for C[n, n] = A[n, n] @ B[n, n]."""
    flops = 2 * n**3
    if backend == "numpy":
        if dtype != "fp32":
            raise ValueError("numpy has no bf16 matmul")
        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        t, times = _median_time(lambda: _wall(lambda: a @ b), repeats, budget_s)
    elif backend in ("torch", "torch-cpu"):
        torch = importlib.import_module("torch")
        dev = "cuda" if backend == "torch" else "cpu"
        if dev == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        td = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        a = torch.randn(n, n, device=dev, dtype=td)
        b = torch.randn(n, n, device=dev, dtype=td)
        if dev == "cuda":
            timed = _cuda_timer(torch)
            t, times = _median_time(lambda: timed(lambda: a @ b), repeats, budget_s)
        else:
            t, times = _median_time(lambda: _wall(lambda: a @ b), repeats, budget_s)
    elif backend == "jax":
        jax = importlib.import_module("jax")
        jnp = jax.numpy
        jd = {"fp32": jnp.float32, "bf16": jnp.bfloat16}[dtype]
        prec = jax.lax.Precision.HIGHEST if dtype == "fp32" else jax.lax.Precision.DEFAULT
        ka, kb = jax.random.split(jax.random.PRNGKey(0))
        a = jax.random.normal(ka, (n, n), dtype=jd)
        b = jax.random.normal(kb, (n, n), dtype=jd)
        mm = jax.jit(lambda x, y: jnp.dot(x, y, precision=prec))
        t, times = _median_time(lambda: _wall(lambda: mm(a, b), lambda r: r.block_until_ready()),
                            repeats, budget_s)
    else:
        raise ValueError(f"unknown matmul backend {backend!r}")
    k = len(times)
    return {"flops_per_s": flops / t, "median_s": t, "runs": k, "backend": backend,
            "spread": host_load.spread(times),
            "method": f"{backend} {dtype} matmul {n}x{n}x{n} (2 n^3 FLOPs), "
                      f"median of {k} after 1 warm-up"}
