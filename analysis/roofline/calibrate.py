"""Measure the local machine's two roofs: memory bandwidth (a large copy) and matmul rate.

    copy  dst[:] = src (bytes read + bytes written, buffers far larger than the caches) ─┐
    matmul C = A @ B  (2 n^3 FLOPs, fp32 and bf16 where supported)                       ─┴► DeviceSpec
        (evidence: measured; date, host, method)  ─► save_spec() ─► ~/.cache/loadgen/calibration.json

Backends: "numpy" copy + numpy fp32 / torch bf16 matmul on the CPU; "torch" on a CUDA GPU (events,
TF32 off for fp32); "jax" on whatever JAX's default device is. Each figure is the median of
``repeats`` runs after one warm-up. These are achieved rates, not theoretical peaks.
"""
from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import platform
import socket
import statistics
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from analysis.roofline.devices import DeviceSpec, Figure

DEFAULT_PATH = Path("~/.cache/loadgen/calibration.json")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _median_time(run: Callable[[], float], repeats: int, budget_s: float) -> tuple[float, int]:
    """Median of run() (each returns seconds) after one warm-up; stops early past budget_s."""
    run()
    times, t_end = [], time.perf_counter() + budget_s
    for _ in range(repeats):
        times.append(run())
        if time.perf_counter() > t_end and len(times) >= 3:
            break
    return statistics.median(times), len(times)


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
        t, k = _median_time(lambda: _wall(lambda: np.copyto(dst, src)), repeats, budget_s)
    elif backend == "torch":
        torch = importlib.import_module("torch")
        src = torch.rand(n, device="cuda")
        dst = torch.empty_like(src)
        timed = _cuda_timer(torch)
        t, k = _median_time(lambda: timed(lambda: dst.copy_(src)), repeats, budget_s)
    elif backend == "jax":
        jax = importlib.import_module("jax")
        src = jax.random.uniform(jax.random.PRNGKey(0), (n,))
        copy = jax.jit(lambda x: x * 1.0)                            # new buffer: read + write
        t, k = _median_time(lambda: _wall(lambda: copy(src), lambda r: r.block_until_ready()),
                            repeats, budget_s)
    else:
        raise ValueError(f"unknown copy backend {backend!r}")
    return {"bytes_per_s": 2 * nbytes / t, "median_s": t, "runs": k, "backend": backend,
            "method": f"{backend} copy of {nbytes / 2**20:.0f} MiB, counted read + write, "
                      f"median of {k} after 1 warm-up"}


def measure_matmul(backend: str, n: int, dtype: str, repeats: int, budget_s: float = 30.0) -> dict:
    """Matmul rate = 2 n^3 / median time for C[n, n] = A[n, n] @ B[n, n]."""
    flops = 2 * n**3
    if backend == "numpy":
        if dtype != "fp32":
            raise ValueError("numpy has no bf16 matmul")
        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        t, k = _median_time(lambda: _wall(lambda: a @ b), repeats, budget_s)
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
            t, k = _median_time(lambda: timed(lambda: a @ b), repeats, budget_s)
        else:
            t, k = _median_time(lambda: _wall(lambda: a @ b), repeats, budget_s)
    elif backend == "jax":
        jax = importlib.import_module("jax")
        jnp = jax.numpy
        jd = {"fp32": jnp.float32, "bf16": jnp.bfloat16}[dtype]
        prec = jax.lax.Precision.HIGHEST if dtype == "fp32" else jax.lax.Precision.DEFAULT
        ka, kb = jax.random.split(jax.random.PRNGKey(0))
        a = jax.random.normal(ka, (n, n), dtype=jd)
        b = jax.random.normal(kb, (n, n), dtype=jd)
        mm = jax.jit(lambda x, y: jnp.dot(x, y, precision=prec))
        t, k = _median_time(lambda: _wall(lambda: mm(a, b), lambda r: r.block_until_ready()),
                            repeats, budget_s)
    else:
        raise ValueError(f"unknown matmul backend {backend!r}")
    return {"flops_per_s": flops / t, "median_s": t, "runs": k, "backend": backend,
            "method": f"{backend} {dtype} matmul {n}x{n}x{n} (2 n^3 FLOPs), "
                      f"median of {k} after 1 warm-up"}


def _has_cuda() -> bool:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def calibrate(device: str = "auto", copy_bytes: Optional[int] = None, matmul_n: Optional[int] = None,
              repeats: int = 10, dtypes: tuple = ("fp32", "bf16"),
              log: Callable[[str], None] = lambda s: None) -> DeviceSpec:
    """Measure and return a spec (evidence: measured). device: auto | cpu | cuda | jax."""
    if device == "auto":
        device = "cuda" if _has_cuda() else "cpu"
    if device == "cuda":
        torch = importlib.import_module("torch")
        name, kind = torch.cuda.get_device_name(0), "cuda"
        copy_backend, mm_backends = "torch", {"fp32": ["torch"], "bf16": ["torch"]}
        copy_bytes, matmul_n = copy_bytes or 2 * 2**30, matmul_n or 8192
    elif device == "jax":
        jax = importlib.import_module("jax")
        d = jax.devices()[0]
        name, kind = d.device_kind, d.platform
        copy_backend, mm_backends = "jax", {"fp32": ["jax"], "bf16": ["jax"]}
        copy_bytes, matmul_n = copy_bytes or 512 * 2**20, matmul_n or 4096
    elif device == "cpu":
        name, kind = cpu_model(), "cpu"
        copy_backend = "numpy"
        # every CPU library present; the best achieved rate is the roof (XLA beats torch's fp32
        # GEMM on some CPUs, torch beats XLA's bf16): a roof below a measured kernel is no roof
        have = [b for b, mod in (("torch-cpu", "torch"), ("jax", "jax"))
                if importlib.util.find_spec(mod) is not None]
        mm_backends = {"fp32": have + ["numpy"], "bf16": have or ["jax"]}
        copy_bytes, matmul_n = copy_bytes or 256 * 2**20, matmul_n or 2048
    else:
        raise ValueError(f"--device must be auto, cpu, cuda or jax, not {device!r}")

    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    src = f"loadgen calibrate on {socket.gethostname()} at {now}"
    log(f"copy bandwidth ({copy_backend}, {copy_bytes / 2**20:.0f} MiB) ...")
    cp = measure_copy(copy_backend, copy_bytes, repeats)
    peak, methods = {}, {"copy": cp}
    for dt in dtypes:
        tried, errors = [], []
        for backend in mm_backends[dt]:
            log(f"matmul {dt} ({backend}, n={matmul_n}) ...")
            try:
                tried.append(measure_matmul(backend, matmul_n, dt, max(3, repeats // 2)))
            except Exception as e:  # a dtype the backend lacks is recorded, not fatal
                errors.append(f"{backend}: {type(e).__name__}: {e}")
        if not tried:
            peak[dt] = Figure(None, "FLOP/s", "unmeasured", src, "", "; ".join(errors))
            continue
        mm = max(tried, key=lambda m: m["flops_per_s"])
        methods[f"matmul_{dt}"] = mm
        methods[f"matmul_{dt}_all"] = tried
        peak[dt] = Figure(mm["flops_per_s"], "FLOP/s", "measured", src,
                          mm["method"] + "; achieved, not a theoretical peak")
    return DeviceSpec(
        name=f"local {kind}: {name}", scope=f"this host ({kind})", peak=peak,
        mem_bandwidth=Figure(cp["bytes_per_s"], "B/s", "measured", src, cp["method"]),
        match=[name] + (["cpu"] if kind == "cpu" else []),
        meta={"evidence": "measured", "date": now, "host": socket.gethostname(), "kind": kind,
              "device_name": name, "methods": methods, "platform": platform.platform()})
