"""The common kernel Y = ReLU(XW + b) across frameworks and three time boundaries (seed sections 2, 11.3).

    KernelCase(M, K, N, dtype) ─► flops(), min_bytes(), intensity()          (evidence: calculated)
    make_inputs (seeded normal, never zeros) ─► reference (CPU float64) ─► max abs error vs tolerance
    run_case(path, case, protocol) ─► kernel_torch.run / kernel_jax.run ─► raw times
        (1) first call: compile + initialisation included
        (2) device: median of `repeats` runs after `warmup`, inputs resident, synchronised
        (3) transfer: X host→device + kernel + Y device→host, every run (median)
    ─► KernelRow (TFLOP/s, GB/s against Q_min, roofline bound and fraction reached)

Shapes: X [M, K], W [K, N], b [N], Y [M, N]. A missing framework is a row with status
"unavailable"; a path that raises is "failed" with a one-line reason.
"""
from __future__ import annotations

import importlib
import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import numpy as np

from analysis.roofline import bounds
from analysis.roofline.devices import DeviceSpec, find

PATHS = ("torch-eager", "torch-compile", "torch-compile-ro", "jax-eager", "jax-jit")
LABELS = {"torch-eager": "PyTorch eager", "torch-compile": "torch.compile",
          "torch-compile-ro": "torch.compile (reduce-overhead)", "jax-eager": "JAX eager",
          "jax-jit": "jax.jit (XLA)"}
FRAMEWORK = {p: p.split("-")[0] for p in PATHS}
ELEM_BYTES = {"fp32": 4, "bf16": 2}
TOL_SCALE = {"fp32": 1e-4, "bf16": 1.5e-2}   # × max(1, sqrt(K / 1024)) × max(1, max|Y_ref|)


@dataclass(frozen=True)
class KernelCase:
    m: int
    k: int = 1024
    n: int = 1024
    dtype: str = "fp32"
    bias_relu: bool = True      # False: plain Y = X W (decode projections)

    def flops(self) -> int:
        """F_matmul = 2 M N K (FMA = 2 FLOPs); bias add and ReLU are M N element ops each."""
        return 2 * self.m * self.n * self.k

    def min_bytes(self) -> int:
        """Q_min: X, W, b read once, Y written once, at the dtype's element size."""
        b = self.n if self.bias_relu else 0
        return (self.m * self.k + self.k * self.n + b + self.m * self.n) * ELEM_BYTES[self.dtype]

    def intensity(self) -> float:
        return self.flops() / self.min_bytes()


@dataclass
class Protocol:
    warmup: int = 50
    repeats: int = 500
    transfer_repeats: Optional[int] = None     # defaults to repeats
    seed: int = 0
    device: str = "auto"                       # auto | cpu
    rotate: int = 1                            # distinct W copies cycled per call (defeats caches)

    @property
    def transfer_runs(self) -> int:
        """Timed with-transfer calls: transfer_repeats, else repeats."""
        return self.transfer_repeats if self.transfer_repeats is not None else self.repeats


@dataclass
class KernelRow:
    path: str
    dtype: str
    M: int
    K: int
    N: int
    status: str                                # ok | unavailable | failed
    reason: str = ""
    framework: str = ""
    device: str = ""                           # e.g. "cpu: <model>", "cuda: NVIDIA H200"
    device_kind: str = ""                      # cpu | cuda | tpu | gpu
    flops: int = 0
    bytes: int = 0
    intensity: float = 0.0
    first_ms: Optional[float] = None
    device_ms: Optional[float] = None
    transfer_ms: Optional[float] = None
    tflops: Optional[float] = None
    gbps: Optional[float] = None
    max_abs_err: Optional[float] = None
    tolerance: Optional[float] = None
    passed: Optional[bool] = None
    bound_ms: Optional[float] = None
    binding: Optional[str] = None
    bound_fraction: Optional[float] = None
    spec: str = ""
    spec_evidence: str = ""
    runs: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    evidence: str = "measured"

    def as_dict(self) -> dict:
        return asdict(self)


def make_inputs(case: KernelCase, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X [M, K] ~ N(0, 1), W [K, N] ~ N(0, 1/K), b [N] ~ N(0, 1), all float32, never zeros."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((case.m, case.k), dtype=np.float32)
    w = (rng.standard_normal((case.k, case.n)) / math.sqrt(case.k)).astype(np.float32)
    b = rng.standard_normal(case.n, dtype=np.float32) if case.bias_relu else np.zeros(0, np.float32)
    return x, w, b


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, bias_relu: bool = True) -> np.ndarray:
    """Y_ref = ReLU(X W + b) in float64 on the CPU, from the float32 inputs."""
    y = x.astype(np.float64) @ w.astype(np.float64)
    return np.maximum(y + b.astype(np.float64), 0.0) if bias_relu else y


def tolerance(dtype: str, k: int, ref: np.ndarray) -> float:
    """Pass/fail bound on max |Y - Y_ref|: TOL_SCALE[dtype] * max(1, sqrt(K / 1024)) * max(1, max |Y_ref|).
    The output's own rounding sets the floor (bf16 keeps 8 significant bits); rounding errors of
    the K products grow about as sqrt(K) beyond the seed's K = 1024."""
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
    return TOL_SCALE[dtype] * max(1.0, math.sqrt(k / 1024)) * scale


def _backend(framework: str):
    return importlib.import_module(f"analysis.kernel.{framework}_paths")


def choose_spec(kind: str, name: str, calibration: Optional[DeviceSpec]) -> Optional[DeviceSpec]:
    """The roofline spec for a row's device: the calibration when it measured this kind of device
    (and, off the CPU, this device name), else the catalogue entry matching the name, else None."""
    if calibration is not None and calibration.meta.get("kind") == kind:
        if kind == "cpu" or name in calibration.match:
            return calibration
    return find(name) if kind != "cpu" else None


def run_case(path: str, case: KernelCase, proto: Protocol,
             modules: Optional[dict] = None,
             spec_for: Callable[[str, str], Optional[DeviceSpec]] = lambda kind, name: None
             ) -> KernelRow:
    """One row. ``modules`` maps framework → importable module name ({"torch": "torch",
    "jax": "jax"} by default); naming a missing module gives an "unavailable" row."""
    fw = FRAMEWORK[path]
    modname = (modules or {}).get(fw, fw)
    row = KernelRow(path, case.dtype, case.m, case.k, case.n, "ok", framework=fw,
                    flops=case.flops(), bytes=case.min_bytes(), intensity=case.intensity())
    try:
        mod = importlib.import_module(modname)
    except ImportError as e:
        row.status, row.reason, row.evidence = "unavailable", f"{modname} not installed ({e})", "unmeasured"
        return row
    x, w, b = make_inputs(case, proto.seed)
    ref = reference(x, w, b, case.bias_relu)
    try:
        raw = _backend(fw).run(mod, path, x, w, b, case.dtype, proto, case.bias_relu)
    except Exception as e:  # a path that cannot run is a row, not a crash
        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        row.status, row.reason, row.evidence = "failed", f"{type(e).__name__}: {msg}", "unmeasured"
        return row
    row.device, row.device_kind, row.versions = raw["device"], raw["kind"], raw["versions"]
    row.first_ms = raw["first_s"] * 1e3
    dev_s = statistics.median(raw["device_s"])
    row.device_ms = dev_s * 1e3
    row.transfer_ms = statistics.median(raw["transfer_s"]) * 1e3 if raw["transfer_s"] else None
    row.runs = {"warmup": proto.warmup, "device": len(raw["device_s"]),
                "transfer": len(raw["transfer_s"]), "timer": raw["timer"]}
    row.tflops = case.flops() / dev_s / 1e12
    row.gbps = case.min_bytes() / dev_s / 1e9
    y = raw["y"].astype(np.float64)
    row.tolerance = tolerance(case.dtype, case.k, ref)
    if y.shape != ref.shape:
        row.passed, row.reason = False, f"output shape {y.shape}, expected {ref.shape}"
    else:
        row.max_abs_err = float(np.max(np.abs(y - ref))) if y.size else 0.0
        row.passed = bool(np.isfinite(y).all() and row.max_abs_err <= row.tolerance)
    spec = spec_for(row.device_kind, raw["device_name"])
    if spec is not None:
        bd = bounds.bound(case.flops(), case.min_bytes(), spec, case.dtype)
        row.spec = spec.name
        row.spec_evidence = (spec.meta.get("evidence") or "documented")
        if bd.time_s is not None:
            row.bound_ms, row.binding = bd.time_s * 1e3, bd.binding + ("" if bd.complete else "?")
            row.bound_fraction = bounds.fraction_of_bound(bd.time_s, dev_s)
    return row


def run_matrix(paths, dtypes, ms, k: int, n: int, proto: Protocol, modules: Optional[dict] = None,
               spec_for=lambda kind, name: None, progress=lambda row: None) -> list[KernelRow]:
    """Every path × dtype × M, in the seed's order (path, then dtype, then M)."""
    rows = []
    for path in paths:
        for dtype in dtypes:
            for m in ms:
                row = run_case(path, KernelCase(m, k, n, dtype), proto, modules, spec_for)
                progress(row)
                rows.append(row)
    return rows


# The seed's published rows (section 11.3; evidence: measured by the seed's authors, 2026-10-19).
# (path, dtype, M, first ms, device ms, with-transfer ms, TFLOP/s, GB/s, max abs err)
SEED_DEVICES = {
    "a100": "NVIDIA A100-SXM4-40GB (108 SMs), PyTorch 2.11.0+cu130, CUDA 13.0",
    "tpu-v5e": "Google Cloud TPU v5 lite (v5e), 1 chip, JAX 0.7.2",
}
SEED_ROWS: dict[str, list[tuple]] = {
    "a100": [
        ("torch-eager", "fp32", 128, 235.921, 0.0696, 0.3587, 3.855, 75.4, 1.97e-06),
        ("torch-eager", "fp32", 1, 15.122, 0.0788, 0.1413, 0.027, 53.4, 3.71e-07),
        ("torch-compile", "fp32", 128, 4394.837, 0.1464, 0.4458, 1.833, 35.8, 1.97e-06),
        ("torch-compile", "fp32", 1, 757.705, 0.1592, 0.2469, 0.013, 26.4, 3.71e-07),
        ("torch-eager", "bf16", 128, 178.124, 0.0625, 0.2410, 4.297, 42.0, 2.93e-02),
        ("torch-eager", "bf16", 1, 27.303, 0.0604, 0.1220, 0.035, 34.8, 1.63e-02),
        ("torch-compile", "bf16", 128, 430.402, 0.1352, 0.3330, 1.986, 19.4, 2.93e-02),
        ("torch-compile", "bf16", 1, 425.909, 0.1393, 0.2281, 0.015, 15.1, 1.63e-02)],
    "tpu-v5e": [
        ("jax-eager", "fp32", 128, 909.203, 0.4714, 0.7069, 0.569, 11.1, 6.79e-07),
        ("jax-eager", "fp32", 1, 188.684, 0.4426, 0.6821, 0.005, 9.5, 6.99e-07),
        ("jax-jit", "fp32", 128, 836.696, 0.1374, 0.5148, 1.954, 38.2, 6.79e-07),
        ("jax-jit", "fp32", 1, 165.463, 0.1425, 0.3875, 0.015, 29.5, 6.99e-07),
        ("jax-eager", "bf16", 128, 198.995, 0.4913, 0.7207, 0.546, 5.3, 2.69e-02),
        ("jax-eager", "bf16", 1, 169.134, 0.4401, 0.6947, 0.005, 4.8, 1.38e-02),
        ("jax-jit", "bf16", 128, 189.531, 0.1619, 0.4488, 1.658, 16.2, 2.31e-02),
        ("jax-jit", "bf16", 1, 151.892, 0.1299, 0.3543, 0.016, 16.2, 1.38e-02)],
}


SEED_SPECS = {"a100": "a100-sxm4-40gb", "tpu-v5e": "tpu-v5e"}


def seed_rows(device: str) -> list[KernelRow]:
    """The seed's rows as KernelRows (evidence: measured by the seed's authors; cite the seed),
    with the roofline bound from the catalogue's documented spec of that device (calculated)."""
    from analysis.roofline.devices import get
    spec, out = get(SEED_SPECS[device]), []
    for path, dtype, m, first, dev, xfer, tf, gb, err in SEED_ROWS[device]:
        case = KernelCase(m, 1024, 1024, dtype)
        out.append(KernelRow(path, dtype, m, 1024, 1024, "ok", framework=FRAMEWORK[path],
                             device=SEED_DEVICES[device], device_kind=device,
                             flops=case.flops(), bytes=case.min_bytes(), intensity=case.intensity(),
                             first_ms=first, device_ms=dev, transfer_ms=xfer, tflops=tf, gbps=gb,
                             max_abs_err=err, passed=True,
                             evidence="measured by the seed's authors, 2026-10-19 "
                                      "(xpu-comparison-course-week5, section 11.3)"))
        bd = bounds.bound(case.flops(), case.min_bytes(), spec, dtype)
        r = out[-1]
        r.spec, r.spec_evidence = spec.name, "documented"
        if bd.time_s is not None:
            r.bound_ms, r.binding = bd.time_s * 1e3, bd.binding + ("" if bd.complete else "?")
            r.bound_fraction = bounds.fraction_of_bound(bd.time_s, dev / 1e3)
    return out
