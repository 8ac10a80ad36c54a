"""The time of one continuous-batching engine step: the roofline floor plus fitted overheads.

    shape (analysis.roofline.model_spec) + device spec (catalogue | calibration | None)
        ─► floor_s(batch, context, prefill_tokens)   max(F / P, Q / BW)   (evidence: calculated)
    + Overheads(step_ms, per_seq_ms, prefill_ms, prefill_req_ms)     (zero: spec only; fitted: calibrated)
        ─► step_s(batch, context, prefill_tokens, admitted) ─► simulate.py

One step decodes ``batch`` running sequences (each attending ``context`` cached positions) and
prefills ``prefill_tokens`` prompt tokens of newly admitted requests in the same pass (prefill
chunks share the step; the weights are read once for both):

    F = decode_step_flops(batch, context) + prefill_flops(prefill_tokens)
    Q = decode_step_bytes(batch, context) + prefill_tokens * kv_bytes_per_token
        (batch = 0: Q = weight bytes + prefill_tokens * kv_bytes_per_token)
    T_step = floor_scale * max(F / P, Q / BW) + step_ms + per_seq_ms * batch
             + prefill_ms * [prefill_tokens > 0] + prefill_req_ms * admitted

(prefill_ms: a pass the prompts of one step share, as engines that batch prefills do;
prefill_req_ms: a cost per prompt, as engines that prefill one prompt per job do; the fit decides).
turnaround_ms is not engine time: simulate.py delays a closed-loop user's next send by it.
floor_scale is 1 (the whole floor) for the spec-only bound; a calibrated fit may lower it, within
[0, 1], when the probes ran faster than the spec's floor allows (fit.py; labelled in its output).

The FLOP and byte arithmetic is analysis.roofline.model_cost's, the floor analysis.roofline.bounds'.
With no device spec the floor is 0 and every millisecond is fitted (calibrated grade only).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from analysis.roofline import bounds, model_cost


@dataclass(frozen=True)
class Overheads:
    """What the roofline leaves out, in milliseconds (fitted by fit.py; zero for a bound)."""
    step_ms: float = 0.0        # per step: launch, sampling, host loop, streaming out
    per_seq_ms: float = 0.0     # per running sequence per step (detokenise, write, bookkeeping)
    prefill_ms: float = 0.0     # per step that prefills (the prefill pass: launch, insert)
    prefill_req_ms: float = 0.0  # per prompt admitted in a step (tokenise, schedule, one job)
    turnaround_ms: float = 0.0  # closed loop, client side: a request's end to the user's next send
    floor_scale: float = 1.0    # share of the roofline floor kept (1: spec-only; < 1: the probes beat it)

    def as_dict(self) -> dict:
        """The millisecond overheads (floor_scale apart: fit.py reports it under "floor")."""
        d = asdict(self)
        d.pop("floor_scale")
        return d

    @classmethod
    def from_vector(cls, v) -> "Overheads":
        return cls(*(float(x) for x in v))

    def vector(self) -> list[float]:
        return [self.step_ms, self.per_seq_ms, self.prefill_ms, self.prefill_req_ms,
                self.turnaround_ms, self.floor_scale]


NAMES = ("step_ms", "per_seq_ms", "prefill_ms", "prefill_req_ms", "turnaround_ms", "floor_scale")


class StepModel:
    """``step_s(batch, context, prefill_tokens, admitted)`` for one model on one device."""

    def __init__(self, shape: dict, spec: Any, overheads: Overheads = Overheads(),
                 slots: Optional[int] = None, prefill_chunk: Optional[int] = None,
                 engine: Optional[Any] = None):
        self.shape, self.spec, self.overheads = shape, spec, overheads
        self.engine = engine                      # a scheduler to mirror (engine_jax.JaxEngine) or None
        self.dtype = shape.get("dtype", "bf16")
        self.slots = slots or shape.get("slots") or None
        self.prefill_chunk = prefill_chunk        # prompt tokens per step while others decode
        self.kv = model_cost.kv_bytes_per_token(shape)
        self.weights = model_cost.weight_bytes(shape)
        peak, bw = bounds.roofs(spec, self.dtype)
        self.complete = bool(peak and bw)
        self._cache: dict = {}

    def with_overheads(self, o: Overheads) -> "StepModel":
        return StepModel(self.shape, self.spec, o, self.slots, self.prefill_chunk, self.engine)

    def floor_s(self, batch: int, context: int, prefill_tokens: int = 0) -> float:
        """max(F / P, Q / BW) of one step (0 when the device has neither roof)."""
        key = (batch, context, prefill_tokens)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        f = q = 0
        if batch:
            f += model_cost.decode_step_flops(self.shape, batch, context)
            q += model_cost.decode_step_bytes(self.shape, batch, context)
        if prefill_tokens:
            f += model_cost.prefill_flops(self.shape, prefill_tokens)
            q += prefill_tokens * self.kv + (0 if batch else self.weights)
        t = bounds.bound(f, q, self.spec, self.dtype).time_s if (f or q) else 0.0
        t = t or 0.0
        if len(self._cache) < 200_000:
            self._cache[key] = t
        return t

    def step_s(self, batch: int, context: int, prefill_tokens: int = 0, admitted: int = 0) -> float:
        o = self.overheads
        return (o.floor_scale * self.floor_s(batch, context, prefill_tokens)
                + (o.step_ms + o.per_seq_ms * batch + (o.prefill_ms if prefill_tokens else 0.0)
                   + o.prefill_req_ms * admitted) / 1e3)
