"""Device specs with the conditions and evidence of every figure.

    CATALOGUE (documented figures, each with its source and conditions)  ─┐
    calibration JSON written by `loadgen calibrate` (evidence: measured) ─┴► DeviceSpec
        ─► roofline.bound(F, Q, spec, dtype)

A figure keeps what the seed text insists on (sections 4.2, 4.3): dtype, dense vs 2:4 sparse, per
chip vs per system, which memory boundary (HBM vs NVLink vs PCIe) and GB vs GiB. Rates are stored in
FLOP/s (or OP/s for integers), bandwidths in B/s, capacities in bytes. A figure that is not published
stays ``None`` with the reason, never a guess.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

TERA = 1e12
GiB = 2**30

SEED = "seed xpu-comparison-course-week5"


@dataclass
class Figure:
    """One number with its unit, conditions and evidence status."""
    value: Optional[float]
    unit: str                      # "FLOP/s" | "OP/s" | "B/s" | "B"
    evidence: str                  # documented | calculated | measured | unmeasured | unpublished
    source: str
    conditions: str = ""
    reason: str = ""               # why value is None

    @classmethod
    def from_dict(cls, d: dict) -> "Figure":
        return cls(**{k: d.get(k, "") for k in ("unit", "evidence", "source", "conditions",
                                                  "reason")}, value=d.get("value"))


@dataclass
class DeviceSpec:
    """A device as one chip (or the unit named in ``scope``)."""
    name: str
    scope: str                                         # "1 chip", "NPU alone", ...
    peak: dict = field(default_factory=dict)           # dtype -> Figure (dense unless stated)
    mem_bandwidth: Optional[Figure] = None             # the main memory boundary
    mem_capacity: Optional[Figure] = None
    other: dict = field(default_factory=dict)          # name -> Figure (sparse, links, ...)
    match: list = field(default_factory=list)          # device names that identify it at run time
    notes: str = ""
    meta: dict = field(default_factory=dict)           # calibration: date, host, method

    def peak_flops(self, dtype: str) -> Optional[float]:
        f = self.peak.get(dtype)
        return f.value if f is not None else None

    def bandwidth(self) -> Optional[float]:
        return self.mem_bandwidth.value if self.mem_bandwidth is not None else None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DeviceSpec":
        fig = lambda x: Figure.from_dict(x) if x else None  # noqa: E731
        return cls(name=d["name"], scope=d.get("scope", ""),
                   peak={k: Figure.from_dict(v) for k, v in (d.get("peak") or {}).items()},
                   mem_bandwidth=fig(d.get("mem_bandwidth")), mem_capacity=fig(d.get("mem_capacity")),
                   other={k: Figure.from_dict(v) for k, v in (d.get("other") or {}).items()},
                   match=list(d.get("match") or []), notes=d.get("notes", ""),
                   meta=dict(d.get("meta") or {}))


def _doc(value, unit, source, conditions="") -> Figure:
    return Figure(value, unit, "documented", source, conditions)


H100_DS = "NVIDIA H100 Tensor Core GPU datasheet, SXM column (as read in " + SEED + " sections 4.1-4.3)"
H200_DS = ("NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column (figures confirmed in secondary "
           "pages quoting it; compute rates are the H100 SXM's)")
A100_DS = "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web), A100 40GB SXM"
V5E_DOC = "Google Cloud TPU v5e documentation, per chip (as read in " + SEED + " sections 4.1, 6.2)"
INTEL_DS = "Intel Core Ultra 9 288V product specifications (as read in " + SEED + " sections 4.1, 6.2)"



def _hopper_peak(source: str, dense_note: str) -> dict[str, Figure]:
    """H100 SXM and H200 compute rates (the same chip): bf16 dense, calculated as half the
    datasheet's 2:4-sparse 1,979 TFLOP/s; plain fp32 67 TFLOP/s."""
    return {"bf16": Figure(1979 * TERA / 2, "FLOP/s", "calculated", source, dense_note),
            "fp32": _doc(67 * TERA, "FLOP/s", source, "plain FP32, not Tensor Core")}


def _hopper_sparse(source: str) -> Figure:
    return _doc(1979 * TERA, "FLOP/s", source, "with 2:4 structured sparsity")



def _hopper(name: str, form: str, ds: str, dense_note: str, bandwidth: float, capacity: float,
            hbm: str, nvlink_note: str, match: list[str], **other: Figure) -> DeviceSpec:
    """A Hopper part from its datasheet ``ds``: the dense peaks, the HBM's bandwidth and size
    (decimal TB/s, GB), the sparse bf16 peak and the 900 GB/s NVLink; ``other`` adds links."""
    return DeviceSpec(
        name, form, peak=_hopper_peak(ds, dense_note),
        mem_bandwidth=_doc(bandwidth, "B/s", ds, f"{hbm}, decimal TB/s"),
        mem_capacity=_doc(capacity, "B", ds, f"{hbm}, decimal GB"),
        other={"bf16_sparse": _hopper_sparse(ds), "nvlink": _doc(900e9, "B/s", ds, nvlink_note),
               **other},
        match=match)

CATALOGUE: dict[str, DeviceSpec] = {
    "h100-sxm": _hopper(
        "NVIDIA H100 SXM", "1 chip (SXM; the PCIe card's figures differ)", H100_DS,
        "dense = half of the 1,979 TFLOP/s that carries the 2:4 sparsity footnote",
        3.35 * TERA, 80e9, "HBM", "NVLink, GPU-to-GPU, not the HBM boundary",
        ["NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", "H100 SXM"],
        pcie_gen5=_doc(128e9, "B/s", H100_DS, "PCIe Gen5 host link")),
    "h200": _hopper(
        "NVIDIA H200", "1 chip (SXM)", H200_DS,
        "dense = half of the 1,979 TFLOP/s sparse figure (~989 TFLOP/s)",
        4.8 * TERA, 141e9, "HBM3e", "NVLink 4, GPU-to-GPU", ["NVIDIA H200"]),
    "a100-sxm4-40gb": DeviceSpec(
        "NVIDIA A100-SXM4-40GB", "1 chip (SXM4)",
        peak={"bf16": _doc(312 * TERA, "FLOP/s", A100_DS, "BF16 Tensor Core, dense (624 sparse)"),
              "fp32": _doc(19.5 * TERA, "FLOP/s", A100_DS, "plain FP32 (TF32 disabled)"),
              "tf32": _doc(156 * TERA, "FLOP/s", A100_DS, "TF32 Tensor Core, dense (312 sparse)")},
        mem_bandwidth=_doc(1555e9, "B/s", A100_DS, "HBM2, decimal GB/s"),
        mem_capacity=_doc(40e9, "B", A100_DS, "HBM2; the seed's runtime saw 42.41 GB (39.49 GiB)"),
        other={"bf16_sparse": _doc(624 * TERA, "FLOP/s", A100_DS, "with 2:4 structured sparsity")},
        match=["NVIDIA A100-SXM4-40GB"],
        notes="The seed gives measurements only for this device; its figures are the datasheet's."),
    "tpu-v5e": DeviceSpec(
        "Google Cloud TPU v5e", "1 chip (ct5lp-hightpu-1t); the 256-chip pod is 50.4 PFLOP/s BF16",
        peak={"bf16": _doc(197 * TERA, "FLOP/s", V5E_DOC, "BF16 per chip")},
        mem_bandwidth=_doc(800 * GiB, "B/s", V5E_DOC,
                           "HBM, binary: 800 GiB/s = 858,993,459,200 B/s (not 800 GB/s: 7.4% off)"),
        mem_capacity=_doc(16e9, "B", V5E_DOC, "HBM per chip"),
        other={"int8": _doc(393 * TERA, "OP/s", V5E_DOC, "INT8 per chip")},
        match=["TPU v5 lite", "TPU v5e"]),
    "core-ultra-9-288v-npu": DeviceSpec(
        "Intel Core Ultra 9 288V NPU", "the NPU alone (not the 120 TOPS platform total)",
        peak={"fp16": Figure(None, "FLOP/s", "unpublished", INTEL_DS,
                             "FP16 is the NPU's native float", "no FP16 rate in the product specs")},
        mem_bandwidth=Figure(None, "B/s", "unpublished", INTEL_DS, "NPU's own path to memory",
                             "the product specifications publish no NPU memory bandwidth"),
        mem_capacity=_doc(32e9, "B", INTEL_DS, "shared system LPDDR5x-8533 on package, up to 32 GB"),
        other={"int8": _doc(48 * TERA, "OP/s", INTEL_DS,
                            "NPU peak INT8; dense or sparse not stated ('Sparsity Support: Yes')"),
               "platform_int8": _doc(120 * TERA, "OP/s", INTEL_DS,
                                     "CPU 5 + GPU 67 + NPU 48, the whole SoC")},
        match=[]),
}


def get(key: str) -> DeviceSpec:
    """A catalogue entry by key (see CATALOGUE); KeyError names the known keys."""
    try:
        return CATALOGUE[key]
    except KeyError:
        raise KeyError(f"unknown device {key!r}; known: {', '.join(CATALOGUE)}") from None


def find(device_name: str) -> Optional[DeviceSpec]:
    """The catalogue entry one of whose run-time names equals ``device_name`` (case-insensitive,
    exact: "NVIDIA H200 NVL" is another part with other rates, so it matches nothing)."""
    low = device_name.strip().lower()
    for spec in CATALOGUE.values():
        if any(m.lower() == low for m in spec.match):
            return spec
    return None


def load_spec(path: str | Path) -> DeviceSpec:
    """A spec saved as JSON (``loadgen calibrate`` writes one)."""
    with open(path, encoding="utf-8") as f:
        return DeviceSpec.from_dict(json.load(f))


def save_spec(spec: DeviceSpec, path: str | Path) -> Path:
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(spec.to_dict(), indent=2) + "\n", encoding="utf-8")
    return p
