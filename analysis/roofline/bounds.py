"""Roofline arithmetic: the time floor of a piece of work on a device, and how close a run came.

    (F FLOPs, Q bytes, spec) ─► bound() ─► T_ideal = max(F / P, Q / BW) and which roof binds
    achieved bytes/s, FLOP/s  ─► mbu(), mfu() ─► fraction of the roof reached
    model shape + spec        ─► serving_bounds() ─► TPOT and TTFT lower bounds (evidence: calculated)

Symbols follow the seed text (section 2.3): F work in FLOPs, Q bytes moved across one named memory
boundary, P the peak rate for that dtype, BW that boundary's bandwidth, I = F / Q, I_ridge = P / BW,
R_roof = min(P, BW * I). Units are decimal (1 GB = 1e9 B, 1 TB/s = 1e12 B/s); GiB helpers convert.

A ``spec`` is either a ``devices.DeviceSpec`` or a plain mapping
``{"peak_flops": FLOP/s, "bandwidth": B/s}``; a missing figure gives ``None`` results, never a guess.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Optional

from analysis.roofline import model_cost

GB = 10**9
TB = 10**12
GiB = 2**30


def gib_per_s(x: float) -> float:
    """GiB/s → B/s. 800 GiB/s = 858,993,459,200 B/s (the seed's TPU v5e example)."""
    return x * GiB


@dataclass
class Bound:
    """The roofline floor of one piece of work on one device."""
    flops: float
    bytes: float
    peak_flops: Optional[float]
    bandwidth: Optional[float]
    compute_s: Optional[float]     # F / P
    memory_s: Optional[float]      # Q / BW
    time_s: Optional[float]        # max of the two known terms; None if both unknown
    binding: Optional[str]         # "compute" | "memory" | None (which roof sets the floor)
    intensity: Optional[float]     # F / Q (FLOP/B)
    ridge: Optional[float]         # P / BW (FLOP/B)
    roof_flops: Optional[float]    # R_roof = min(P, BW * I) (FLOP/s)
    complete: bool                 # both roofs known (else the floor may be too low)
    evidence: str = "calculated"

    def as_dict(self) -> dict:
        return asdict(self)


def roofs(spec: Any, dtype: str = "bf16") -> tuple[Optional[float], Optional[float]]:
    """(peak FLOP/s for dtype, bandwidth B/s) of a DeviceSpec or a plain mapping; None if unknown."""
    if spec is None:
        return None, None
    if isinstance(spec, Mapping):
        peak = spec.get("peak_flops")
        if isinstance(peak, Mapping):
            peak = peak.get(dtype)
        return peak, spec.get("bandwidth")
    return spec.peak_flops(dtype), spec.bandwidth()


def ridge_point(peak_flops: Optional[float], bandwidth: Optional[float]) -> Optional[float]:
    """I_ridge = P / BW in FLOP/B: below it the memory roof binds."""
    if not peak_flops or not bandwidth:
        return None
    return peak_flops / bandwidth


def bound(flops: float, nbytes: float, spec: Any, dtype: str = "bf16") -> Bound:
    """T_ideal = max(F / P, Q / BW) (seed section 7). A term with an unknown roof is left out and
    the result is marked incomplete; with neither roof known the time is None."""
    peak, bw = roofs(spec, dtype)
    compute_s = flops / peak if peak else None
    memory_s = nbytes / bw if bw else None
    terms = [t for t in (compute_s, memory_s) if t is not None]
    time_s = max(terms) if terms else None
    binding = None
    if compute_s is not None and memory_s is not None:
        binding = "compute" if compute_s >= memory_s else "memory"
    elif terms:
        binding = "compute" if compute_s is not None else "memory"
    intensity = flops / nbytes if nbytes else None
    roof = None
    if peak and bw and intensity is not None:
        roof = min(peak, bw * intensity)
    return Bound(flops, nbytes, peak, bw, compute_s, memory_s, time_s, binding, intensity,
                 ridge_point(peak, bw), roof, complete=bool(peak and bw))


def crossing_intensity(spec_a: Any, spec_b: Any, dtype: str = "bf16") -> Optional[float]:
    """The intensity where two devices' roofs are equal, when one has more compute and the other
    more bandwidth: the compute-richer device's memory roof BW_a * I meets the other's flat P_b.
    Seed: A (200 TFLOP/s, 1 TB/s) vs B (100 TFLOP/s, 2 TB/s) cross at I = 100 FLOP/B."""
    pa, ba = roofs(spec_a, dtype)
    pb, bb = roofs(spec_b, dtype)
    if not (pa and ba and pb and bb):
        return None
    if pa < pb:
        pa, ba, pb, bb = pb, bb, pa, ba
    if ba >= bb:
        return None  # one device dominates everywhere
    return pb / ba


def mbu(achieved_bytes_per_s: Optional[float], bandwidth: Optional[float]) -> Optional[float]:
    """Model bandwidth utilisation = achieved B/s / BW."""
    if achieved_bytes_per_s is None or not bandwidth:
        return None
    return achieved_bytes_per_s / bandwidth


def mfu(achieved_flops_per_s: Optional[float], peak_flops: Optional[float]) -> Optional[float]:
    """Model FLOP utilisation = achieved FLOP/s / P."""
    if achieved_flops_per_s is None or not peak_flops:
        return None
    return achieved_flops_per_s / peak_flops


def fraction_of_bound(bound_s: Optional[float], measured_s: Optional[float]) -> Optional[float]:
    """T_ideal / T_measured: 1.0 means the run sat on the roof."""
    if bound_s is None or not measured_s:
        return None
    return bound_s / measured_s


def serving_bounds(shape: dict, spec: Any, batch: int, context_len: int,
                   prompt_tokens: int) -> dict:
    """Lower bounds for an LLM server on one device (evidence: calculated).

    TPOT floor = bound(decode_step_flops, decode_step_bytes) for ``batch`` sequences each attending
    ``context_len`` positions: every weight and every cached K/V byte is read once per step.
    TTFT floor = bound(prefill_flops(prompt_tokens), weights + the prompt's K/V written) for one
    request alone: queueing, network, tokenisation and sampling are excluded (they only add).
    """
    dtype = shape.get("dtype", "bf16")
    step = bound(model_cost.decode_step_flops(shape, batch, context_len),
                 model_cost.decode_step_bytes(shape, batch, context_len), spec, dtype)
    pre_bytes = (model_cost.weight_bytes(shape)
                 + prompt_tokens * model_cost.kv_bytes_per_token(shape))
    pre = bound(model_cost.prefill_flops(shape, prompt_tokens), pre_bytes, spec, dtype)
    tokens_per_s = batch / step.time_s if step.time_s else None
    return {
        "evidence": "calculated",
        "assumptions": "one device; weights and KV cache read once per step; activations, "
                       "sampling, launch and host overhead excluded (they only add time)",
        "batch": batch, "context_len": context_len, "prompt_tokens": prompt_tokens,
        "tpot_lower_bound_ms": step.time_s * 1e3 if step.time_s is not None else None,
        "tpot_binding": step.binding,
        "decode_tokens_per_s_upper_bound": tokens_per_s,
        "ttft_lower_bound_ms": pre.time_s * 1e3 if pre.time_s is not None else None,
        "ttft_binding": pre.binding,
        "complete": step.complete and pre.complete,
        "decode_step": step.as_dict(), "prefill": pre.as_dict(),
    }
