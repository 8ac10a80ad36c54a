"""Several models (or LoRA adapters) in one run: ``api.models`` and ``api.model_assignment``.

    api.models: [{name, weight}]  (weight > 0; names distinct)
    api.model_assignment: random | round_robin
        ─► ModelMix(names, weights, assignment, seed) ─► pick(request id) ─► the body's "model"
           and Record.model

Pure and seeded: the model of request ``id`` is a function of (the scenario's seed, id) only, so
the one-process runner, every --procs sender and every Locust worker (each rebuilds the scenario
and holds request ids of the same plan) send the same model for the same id, whatever slice they
own. ``request.Shape.prepare`` asks it (both engines' one request shape); the plan's ids are the
key, so the assignment is the plan's by construction.

    random       id ─► splitmix64(seed, id) / 2**64 = u in [0, 1) ─► the model whose slice of the
                 cumulative weights holds u (shares tend to weight / Σ weights)
    round_robin  the smooth weighted round robin (nginx's) over the weights as integers in the
                 same ratio (0.3 : 0.7 ─► 3 : 7; see ``scaled``): a cycle of P = Σ of them;
                 id ─► cycle[id mod P]. Equal weights: a, b, a, b, ...; weights 2:1:
                 a, b, a, a, b, a, ... (each model spread over the cycle, not in a block)

May import: pydantic, the standard library, loadgen.scenario.strict.
"""
from __future__ import annotations

import bisect
import math
from fractions import Fraction
from functools import reduce
from typing import Literal, Optional

from pydantic import Field, field_validator

from loadgen.scenario.strict import Strict

MAX_MODELS = 64
SCALE = 1000                       # round_robin: denominators / the largest weight's slots
MAX_CYCLE = 100_000                # round_robin: the longest cycle kept exact
MASK = (1 << 64) - 1


class ModelWeight(Strict):
    """One entry of ``api.models``: a model (or adapter) name the server lists, and its weight."""

    name: str = Field(min_length=1, max_length=256)
    weight: float = 1.0

    @field_validator("weight")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"must be > 0, got {v:g} (a model that gets no requests: leave it out)")
        if v > 1e9:
            raise ValueError(f"must be at most 1e9, got {v:g}")
        return v


Assignment = Literal["random", "round_robin"]


def check_models(models: list[ModelWeight]) -> None:
    """Distinct names, at least one, at most MAX_MODELS (ValueError naming the problem)."""
    if not models:
        raise ValueError("api.models: give at least one {name, weight} (or api.model for one)")
    if len(models) > MAX_MODELS:
        raise ValueError(f"api.models: at most {MAX_MODELS} models, got {len(models)}")
    seen: set = set()
    for m in models:
        if m.name in seen:
            raise ValueError(f"api.models: '{m.name}' is listed twice")
        seen.add(m.name)


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def unit(seed: int, rid: int) -> float:
    """A uniform number in [0, 1) of (seed, request id): the same in every process."""
    return _splitmix64((_splitmix64(seed & MASK) ^ (rid & MASK)) & MASK) / 2.0 ** 64


def scaled(weights: list[float]) -> list[int]:
    """The weights as small integers in the same ratio: as fractions (denominators up to SCALE)
    over their common denominator and gcd; when that cycle would exceed MAX_CYCLE, the largest
    weight SCALE slots and each at least 1 (ratios then within 1/SCALE of the largest)."""
    fr = [Fraction(w).limit_denominator(SCALE) for w in weights]
    den = reduce(lambda a, b: a * b // math.gcd(a, b), (f.denominator for f in fr))
    ints = [int(f * den) for f in fr]
    if min(ints) < 1 or sum(ints) // reduce(math.gcd, ints) > MAX_CYCLE:
        top = max(weights)
        ints = [max(1, round(w / top * SCALE)) for w in weights]
    g = reduce(math.gcd, ints)
    return [i // g for i in ints]


def smooth_cycle(weights: list[int]) -> list[int]:
    """nginx's smooth weighted round robin over integer weights: one full cycle of indexes."""
    total, cur, out = sum(weights), [0] * len(weights), []
    for _ in range(total):
        for i, w in enumerate(weights):
            cur[i] += w
        best = max(range(len(weights)), key=lambda i: (cur[i], -i))
        cur[best] -= total
        out.append(best)
    return out


class ModelMix:
    """Which model request ``id`` asks for (pure; see the module doc)."""

    def __init__(self, names: list[str], weights: list[float], assignment: str, seed: int):
        self.names, self.weights = list(names), [float(w) for w in weights]
        self.assignment, self.seed = assignment, int(seed)
        total = sum(self.weights)
        acc, self.cum = 0.0, []
        for w in self.weights:
            acc += w
            self.cum.append(acc / total)
        self.cum[-1] = 1.0
        self.cycle = smooth_cycle(scaled(self.weights)) if assignment == "round_robin" else None

    @classmethod
    def of(cls, models: Optional[list], assignment: str, seed: int) -> Optional["ModelMix"]:
        if not models:
            return None
        return cls([m.name for m in models], [m.weight for m in models], assignment, seed)

    def index(self, rid: int) -> int:
        if self.cycle is not None:
            return self.cycle[rid % len(self.cycle)]
        return min(bisect.bisect_right(self.cum, unit(self.seed, rid)), len(self.names) - 1)

    def pick(self, rid: int) -> str:
        return self.names[self.index(rid)]

    def shares(self) -> dict[str, float]:
        """Each model's intended share (weight / Σ weights)."""
        total = sum(self.weights)
        return {n: w / total for n, w in zip(self.names, self.weights)}
