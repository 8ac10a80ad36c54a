"""Token sampling inside a jitted function: greedy, temperature, top-p, per-request seeds.

``sample(logits[B, V], temperature[B], top_p[B], keys[B, 2], step[B]) -> tokens[B]``

* temperature 0 → greedy; a batch of only greedy slots skips the random work (lax.cond);
* top-p < 1 → keep the most likely tokens whose probability reaches top_p (the nucleus);
* randomness: one uniform number per token from key = fold_in(request key, step), step counting
  the request's generated tokens, so a seed gives the same tokens whatever else is in the batch.

Written for XLA:CPU, where (measured here, [32, 32000] fp32) ``jnp.argmax`` took 2.4 ms, ``cumsum``
3.4 ms, ``sort`` ~200 ms and Gumbel noise ~20 ms, while a max or masked sum takes ~0.15 ms. So:
argmax = max, then the lowest index equal to it; the nucleus threshold and the inverse-CDF draw are
bisections made of masked sums (24 steps on the probability value, ceil(log2 V) on the index).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

_THRESH_STEPS = 24


def request_key(seed: int) -> np.ndarray:
    """The raw threefry key data [2] uint32 for a seed (as jax.random.PRNGKey does for 64-bit seeds)."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    return np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)


def greedy(logits: jax.Array) -> jax.Array:
    """[B, V] → [B] int32, the lowest index of the maximum (== jnp.argmax, faster on XLA:CPU)."""
    v = logits.shape[-1]
    m = jnp.max(logits, axis=-1, keepdims=True)
    idx = jnp.arange(v, dtype=jnp.int32)
    return jnp.min(jnp.where(logits == m, idx, v), axis=-1).astype(jnp.int32)


def _nucleus_threshold(p: jax.Array, top_p: jax.Array) -> jax.Array:
    """p [B, V] unnormalised (max 1) → tau [B, 1]: the largest tau with mass(p >= tau) >= top_p·Z."""
    target = (top_p * jnp.sum(p, axis=-1))[:, None]                # [B, 1]

    def body(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        ok = jnp.sum(jnp.where(p >= mid, p, 0.0), axis=-1, keepdims=True) >= target
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    b = p.shape[0]
    lo, _ = jax.lax.fori_loop(0, _THRESH_STEPS, body, (jnp.zeros((b, 1)), jnp.ones((b, 1))))
    return lo


def _inverse_cdf(p: jax.Array, u: jax.Array) -> jax.Array:
    """p [B, V] >= 0, u [B] in (0, 1] → the smallest index i with sum(p[:i+1]) >= u·sum(p)."""
    b, v = p.shape
    target = (u * jnp.sum(p, axis=-1))[:, None]                    # [B, 1]
    idx = jnp.arange(v, dtype=jnp.int32)[None, :]

    def body(_, lohi):
        lo, hi = lohi                                              # prefix(lo) < target <= prefix(hi)
        mid = (lo + hi) // 2
        ok = jnp.sum(jnp.where(idx <= mid, p, 0.0), axis=-1, keepdims=True) >= target
        return jnp.where(ok, lo, mid), jnp.where(ok, mid, hi)

    steps = max(1, math.ceil(math.log2(v + 1)))
    init = (jnp.full((b, 1), -1, jnp.int32), jnp.full((b, 1), v - 1, jnp.int32))
    _, hi = jax.lax.fori_loop(0, steps, body, init)
    return hi[:, 0]


def sample(logits: jax.Array, temperature: jax.Array, top_p: jax.Array, keys: jax.Array,
           step: jax.Array) -> jax.Array:
    """logits [B, V] fp32; temperature, top_p [B] f32; keys [B, 2] uint32; step [B] int32 → [B] int32."""
    best = greedy(logits)

    def random_branch(_):
        t = jnp.maximum(temperature, 1e-6)[:, None]
        scaled = logits / t
        p = jnp.exp(scaled - jnp.max(scaled, axis=-1, keepdims=True))   # [B, V], max 1
        p = jax.lax.cond(jnp.any(top_p < 1.0),
                         lambda q: jnp.where((top_p[:, None] >= 1.0) | (q >= _nucleus_threshold(q, top_p)),
                                             q, 0.0),
                         lambda q: q, p)
        sub = jax.vmap(jax.random.fold_in)(keys, step.astype(jnp.uint32))
        u = 1.0 - jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float32))(sub)   # (0, 1]
        drawn = _inverse_cdf(p, u)
        drawn = jnp.where(jnp.take_along_axis(p, drawn[:, None], axis=-1)[:, 0] > 0, drawn, best)
        return jnp.where(temperature > 0, drawn, best)

    return jax.lax.cond(jnp.any(temperature > 0), random_branch, lambda _: best, None)
