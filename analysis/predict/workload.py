"""Seeded prompt and output lengths drawn from a scenario's token-length distributions.

    workload.prompt_tokens / output_tokens (Dist as a plain dict: dist, value, mean, std, min, max)
        ─► lengths(dist, n, rng) ─► int array, clipped to [min, max]
        ─► sample(workload, n, seed) ─► [(prompt_len, output_len), ...] ─► simulate.py

Same families as loadgen.scenario.model.Dist: fixed (value), uniform [min, max], normal (mean,
std), lognormal (the mean and std of the resulting lengths). Lengths are counted in the
workload's tokens; the server is assumed to count the same (tokenizer bytes on servers.jax).
The draws are the forecast's own (numpy Generator(seed)), not the run's prompts.
"""
from __future__ import annotations

import math

import numpy as np


def lengths(dist: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    kind = dist.get("dist", "fixed")
    lo = int(dist.get("min") or 1)
    hi = dist.get("max")
    if kind == "fixed":
        x = np.full(n, float(dist["value"]))
    elif kind == "uniform":
        x = rng.integers(lo, int(hi) + 1, size=n).astype(float)
    elif kind == "normal":
        x = rng.normal(dist["mean"], dist["std"], size=n)
    elif kind == "lognormal":
        m, s = float(dist["mean"]), float(dist["std"])
        sigma2 = math.log(1 + (s / m) ** 2)
        x = rng.lognormal(math.log(m) - sigma2 / 2, math.sqrt(sigma2), size=n)
    else:
        raise ValueError(f"dist: unknown length distribution {kind!r}")
    x = np.maximum(np.rint(x), lo)
    if hi is not None:
        x = np.minimum(x, int(hi))
    return x.astype(int)


def sample(workload: dict, n: int, seed: int = 0) -> list[tuple[int, int]]:
    """n (prompt_len, output_len) pairs; ``workload`` holds prompt_tokens and output_tokens."""
    rng = np.random.default_rng(seed)
    p = lengths(workload["prompt_tokens"], n, rng)
    o = lengths(workload["output_tokens"], n, rng)
    return list(zip(p.tolist(), o.tolist()))


def mean_lengths(workload: dict, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    pairs = sample(workload, n, seed)
    return (float(np.mean([a for a, _ in pairs])), float(np.mean([b for _, b in pairs])))
