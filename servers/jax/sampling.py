"""Token sampling inside the jitted step: greedy, temperature, top-p, per-request seeds.

``sample(logits[S, V], temperature[S], top_p[S], keys[S, 2], step[S]) -> tokens[S]``

* temperature 0 → argmax (greedy); a whole batch of greedy slots skips the random work (lax.cond);
* top-p < 1 → keep the smallest set of most likely tokens whose probability reaches top_p (the
  sort over V only runs when some slot asks for it);
* randomness: the Gumbel-max trick with key = fold_in(request key, step), where step counts the
  request's generated tokens, so a seed gives the same tokens whatever else is in the batch.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def request_key(seed: int) -> np.ndarray:
    """The raw threefry key data [2] uint32 for a seed (as jax.random.PRNGKey does for 64-bit seeds)."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    return np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)


def _top_p_filter(scaled: jax.Array, top_p: jax.Array) -> jax.Array:
    """scaled [S, V], top_p [S] → scaled with tokens outside each slot's nucleus set to -inf."""
    desc = -jnp.sort(-scaled, axis=-1)                             # [S, V] largest first
    probs = jax.nn.softmax(desc, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs                    # mass strictly above each token
    keep = before < top_p[:, None]                                 # the first token is always kept
    thresh = jnp.min(jnp.where(keep, desc, jnp.inf), axis=-1, keepdims=True)   # [S, 1]
    return jnp.where(scaled >= thresh, scaled, -jnp.inf)


def sample(logits: jax.Array, temperature: jax.Array, top_p: jax.Array, keys: jax.Array,
           step: jax.Array) -> jax.Array:
    """logits [S, V] fp32; temperature, top_p [S] f32; keys [S, 2] uint32; step [S] int32 → [S] int32."""
    greedy = jnp.argmax(logits, axis=-1).astype(jnp.int32)

    def random_branch(_):
        t = jnp.maximum(temperature, 1e-6)[:, None]
        scaled = logits / t
        scaled = jax.lax.cond(jnp.any(top_p < 1.0), lambda s: _top_p_filter(s, top_p),
                              lambda s: s, scaled)
        sub = jax.vmap(jax.random.fold_in)(keys, step.astype(jnp.uint32))
        gumbel = jax.vmap(lambda k: jax.random.gumbel(k, (logits.shape[-1],), jnp.float32))(sub)
        drawn = jnp.argmax(scaled + gumbel, axis=-1).astype(jnp.int32)
        return jnp.where(temperature > 0, drawn, greedy)

    return jax.lax.cond(jnp.any(temperature > 0), random_branch, lambda _: greedy, None)
