"""Measure the local machine's two roofs: memory bandwidth (a large read) and matmul rate.

    read   y = A @ ones (a GEMV: each byte of A, far larger than the caches, read once;
           bytes read / median time) ─► mem_bandwidth (the roof of a decode step's reads) ─┐
    copy   dst[:] = src (bytes read + written) ─► other["copy_bandwidth"], methods["copy"] ─┤
    matmul C = A @ B (2 n^3 FLOPs, fp32 and bf16 where supported)                   ─┴► DeviceSpec
        (evidence: measured [busy host: ...]; date, host, method, host load)
        ─► save_spec() ─► ~/.cache/loadgen/calibration.json

The probes are analysis/roofline/calib_probes.py's (measure_read, measure_copy, measure_matmul).
Backends: numpy, torch (CPU) and JAX reads and matmuls on the CPU (the best achieved rate of each
is the roof), a numpy copy; "torch" on a CUDA GPU (events, TF32 off for fp32); "jax" on whatever
JAX's default device is. Each figure is the median of ``repeats`` runs after one warm-up. These
are achieved rates, not theoretical peaks.

Why a read, not the copy (issue 40): on this project's CPU a numpy copy (2 × bytes / time) came
out below what XLA's batch-1 decode reads (a 30.3 ms floor against 29.05 ms measured), so a
roofline from it was no bound. Calibrations saved before the read probe hold the copy's figure
as mem_bandwidth and no ``methods["read"]``; they still load (copy_only() says which).

The host's load during the calibration (host_load: other processes' CPU, steal, load average,
spread between repeats) is kept in ``meta["host_load"]``; a busy calibration is taken again once,
and labelled ``meta["evidence"] = "measured (busy host: load 1.9, spread 22 %)"`` if still busy.
"""
from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import platform
import socket
import time
from pathlib import Path
from typing import Callable, Optional

from analysis.roofline import host_load
from analysis.roofline.calib_probes import measure_copy, measure_matmul, measure_read
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


def _has_cuda() -> bool:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


SLOW_BF16 = frozenset({"NO AVX", "DEFAULT", "AVX2"})    # torch's CPU capability: bf16 emulated


def torch_bf16_usable() -> bool:
    """Whether torch's CPU bf16 matmul is worth timing: on a CPU whose best torch kernels are
    AVX2 or less it is emulated (one 2048³ matmul took 58 s on this project's VM, `loadgen
    calibrate` 8 min), never the roof; JAX's bf16 is timed there instead."""
    try:
        cap = importlib.import_module("torch").backends.cpu.get_cpu_capability()
    except Exception:                               # no torch, or too old to say
        return False
    return cap.upper() not in SLOW_BF16


def _plan(device: str, copy_bytes: Optional[int], matmul_n: Optional[int]) -> dict:
    """Which device, backends and sizes ``calibrate`` uses."""
    if device == "auto":
        device = "cuda" if _has_cuda() else "cpu"
    if device == "cuda":
        torch = importlib.import_module("torch")
        return dict(name=torch.cuda.get_device_name(0), kind="cuda", copy_backend="torch",
                    read_backends=["torch"],
                    mm_backends={"fp32": ["torch"], "bf16": ["torch"]},
                    copy_bytes=copy_bytes or 2 * 2**30, matmul_n=matmul_n or 8192)
    if device == "jax":
        jax = importlib.import_module("jax")
        d = jax.devices()[0]
        return dict(name=d.device_kind, kind=d.platform, copy_backend="jax",
                    read_backends=["jax"],
                    mm_backends={"fp32": ["jax"], "bf16": ["jax"]},
                    copy_bytes=copy_bytes or 512 * 2**20, matmul_n=matmul_n or 4096)
    if device == "cpu":
        # every CPU library present; the best achieved rate is the roof (XLA beats torch's fp32
        # GEMM on some CPUs, torch beats XLA's bf16): a roof below a measured kernel is no roof
        have = [b for b, mod in (("torch-cpu", "torch"), ("jax", "jax"))
                if importlib.util.find_spec(mod) is not None]
        bf16 = [b for b in have if b != "torch-cpu" or torch_bf16_usable()]
        return dict(name=cpu_model(), kind="cpu", copy_backend="numpy",
                    read_backends=have + ["numpy"],
                    mm_backends={"fp32": have + ["numpy"], "bf16": bf16 or ["jax"]},
                    copy_bytes=copy_bytes or 256 * 2**20, matmul_n=matmul_n or 2048)
    raise ValueError(f"--device must be auto, cpu, cuda or jax, not {device!r}")


def _reads(plan: dict, repeats: int, log: Callable[[str], None]) -> tuple[list, list]:
    """Every read backend's probe (a backend that fails is recorded, not fatal)."""
    tried, errors = [], []
    for backend in plan["read_backends"]:
        log(f"read bandwidth ({backend}, {plan['copy_bytes'] / 2**20:.0f} MiB) ...")
        try:
            tried.append(measure_read(backend, plan["copy_bytes"], repeats))
        except Exception as e:
            errors.append(f"{backend}: {type(e).__name__}: {e}")
    return tried, errors


def bandwidth_figures(reads: list, read_errors: list, cp: dict, src: str) -> tuple[Figure, Figure]:
    """(mem_bandwidth, copy_bandwidth): the best read is the roof, the copy kept beside it,
    labelled; with no read probe (every backend failed) the copy stands in, and says so."""
    copy = Figure(cp["bytes_per_s"], "B/s", "measured", src,
                  cp["method"] + "; a copy (read + write counted), not the roof: "
                                 "mem_bandwidth is the read bandwidth")
    if not reads:
        return Figure(cp["bytes_per_s"], "B/s", "measured", src,
                      cp["method"] + "; no read probe ran (" + "; ".join(read_errors) +
                      "): the copy stands in, below what weight reads get"), copy
    rd = max(reads, key=lambda m: m["bytes_per_s"])
    return Figure(rd["bytes_per_s"], "B/s", "measured", src,
                  f"{rd['method']}; the best of {len(reads)} read backend(s); the copy "
                  f"(read + write) gave {cp['bytes_per_s'] / 1e9:.1f} GB/s"), copy


def _measure(plan: dict, repeats: int, dtypes: tuple, log: Callable[[str], None],
             probe: Callable[[], dict]) -> DeviceSpec:
    """One calibration: reads and a copy, then each dtype's matmul, the host's load around."""
    name, kind = plan["name"], plan["kind"]
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    src = f"loadgen calibrate on {socket.gethostname()} at {now}"
    before = probe()
    reads, read_errors = _reads(plan, repeats, log)
    log(f"copy bandwidth ({plan['copy_backend']}, {plan['copy_bytes'] / 2**20:.0f} MiB) ...")
    cp = measure_copy(plan["copy_backend"], plan["copy_bytes"], repeats)
    peak, methods, spreads = {}, {"copy": cp}, {"copy": cp["spread"]}
    if reads:
        rd = max(reads, key=lambda m: m["bytes_per_s"])
        methods.update(read=rd, read_all=reads)
        spreads["read"] = rd["spread"]
    if read_errors:
        methods["read_errors"] = read_errors
    for dt in dtypes:
        tried, errors = [], []
        for backend in plan["mm_backends"][dt]:
            log(f"matmul {dt} ({backend}, n={plan['matmul_n']}) ...")
            try:
                tried.append(measure_matmul(backend, plan["matmul_n"], dt, max(3, repeats // 2)))
            except Exception as e:  # a dtype the backend lacks is recorded, not fatal
                errors.append(f"{backend}: {type(e).__name__}: {e}")
        if not tried:
            peak[dt] = Figure(None, "FLOP/s", "unmeasured", src, "", "; ".join(errors))
            continue
        mm = max(tried, key=lambda m: m["flops_per_s"])
        methods[f"matmul_{dt}"] = mm
        methods[f"matmul_{dt}_all"] = tried
        spreads[f"matmul {dt}"] = mm["spread"]
        peak[dt] = Figure(mm["flops_per_s"], "FLOP/s", "measured", src,
                          mm["method"] + "; achieved, not a theoretical peak")
    load = host_load.between(before, probe())
    verdict = host_load.assess(load, spreads)
    bw, copy = bandwidth_figures(reads, read_errors, cp, src)
    return DeviceSpec(
        name=f"local {kind}: {name}", scope=f"this host ({kind})", peak=peak,
        mem_bandwidth=bw, other={"copy_bandwidth": copy},
        match=[name] + (["cpu"] if kind == "cpu" else []),
        meta={"evidence": verdict["label"], "date": now, "host": socket.gethostname(),
              "kind": kind, "device_name": name, "methods": methods,
              "platform": platform.platform(),
              "host_load": {**load, "spreads": spreads, **verdict}})


def copy_only(spec: DeviceSpec) -> bool:
    """A calibration saved before the read probe: its mem_bandwidth is a copy's (read + write),
    below what weight reads get on some hosts. It still loads; calibrate again to replace it."""
    methods = (spec.meta or {}).get("methods") or {}
    return "copy" in methods and "read" not in methods


def numpy_read(spec: DeviceSpec) -> Optional[float]:
    """The figure a numpy read probe taken now compares with (a spot check): the calibration's
    own numpy read, else its memory bandwidth (a spec without one: a fake, an older file)."""
    for m in ((spec.meta or {}).get("methods") or {}).get("read_all") or []:
        if isinstance(m, dict) and m.get("backend") == "numpy" and m.get("bytes_per_s"):
            return float(m["bytes_per_s"])
    return spec.bandwidth()


def calibrate(device: str = "auto", copy_bytes: Optional[int] = None, matmul_n: Optional[int] = None,
              repeats: int = 10, dtypes: tuple = ("fp32", "bf16"),
              log: Callable[[str], None] = lambda s: None,
              probe: Callable[[], dict] = host_load.snapshot,
              retry_pause_s: float = 2.0) -> DeviceSpec:
    """Measure and return a spec (evidence: measured). device: auto | cpu | cuda | jax.

    A calibration on a busy host (host_load.assess) is taken again once after ``retry_pause_s``;
    a quiet second try is kept, else the try with the higher bandwidth (interference only slows
    a read), labelled ``measured (busy host: ...)`` in ``meta["evidence"]``. ``probe`` reads the
    host's load (tests pass a fake)."""
    plan = _plan(device, copy_bytes, matmul_n)
    spec = _measure(plan, repeats, dtypes, log, probe)
    if not spec.meta["host_load"]["busy"]:
        return spec
    first = spec.meta["host_load"]
    log(f"busy host ({'; '.join(first['reasons'])}): measuring once more ...")
    time.sleep(retry_pause_s)
    again = _measure(plan, repeats, dtypes, log, probe)
    tries = [dict(first), dict(again.meta["host_load"])]
    if not again.meta["host_load"]["busy"] or again.bandwidth() > spec.bandwidth():
        spec = again
    spec.meta["host_load"]["attempts"] = tries
    return spec
