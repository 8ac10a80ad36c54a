"""A Llama-style decoder in JAX: RMSNorm, RoPE (HF rotate-half), grouped-query attention, SwiGLU.

Parameters are a plain pytree (one dict per layer, so a jitted step reads each weight in place):

    {"embed": [V, D], "norm": [D], "lm_head": [D, V] (absent when tied: logits = x @ embed.T),
     "layers": [{"attn_norm": [D], "wqkv": [D, Q+2K], "bqkv": [Q+2K] (Qwen2 only),
                 "wo": [Q, D], "ffn_norm": [D], "w13": [D, 2F] (gate | up), "w2": [F, D]}, ...]}

with Q = n_heads·head_dim, K = n_kv_heads·head_dim, F = ffn_dim. q/k/v and gate/up are fused so
that a decode step does one GEMV per fused matrix. The KV cache is a tuple over layers of
(k [slots, n_kv_heads, head_dim, max_len], v [slots, n_kv_heads, max_len, head_dim]): K is stored
transposed so that decode's q·K is a fused multiply + reduce over head_dim, vectorised along the
positions. On XLA:CPU (measured here, 32 slots, 4 KV heads, 1024 positions, one layer) that took
~4.5 ms against ~23-38 ms for the batched einsum over the [.., max_len, head_dim] layout.

Three entry points, all pure functions to be jitted by the engine:
  * ``forward_reference(params, args, tokens[T]) -> logits[T, V]``  full causal attention, no cache;
  * ``prefill(params, args, tokens[Tb]) -> (hidden[Tb, D], ks, vs)``  one prompt, padded to a bucket;
  * ``prefill_chunk(params, args, kv, tokens[C], offset) -> (hidden[C, D], kv)``  a long prompt
    in chunks (interleaved with decode steps by the orchestrator);
  * ``insert_prefix(cache, kv, slot) -> cache``  writes a prefill's K/V into one slot's rows;
  * ``decode(params, args, cache, tokens[S], pos[S], attn_len) -> (logits[S, V], cache)``  one token
    per slot; attention reads only the first ``attn_len`` cache positions (a static bucket);
    with ``chunk=(tokens[C], slot, offset)`` it also prefills C prompt tokens of one slot in the
    same matmuls (one weight read for both) and returns (logits, hidden[C, D], cache).

Norms, softmax and logits are computed in fp32 whatever the weight dtype.
The weight matmuls go through kernels.matmul / matmul_t: XLA's dot unless the server chose the
FFI kernel (`--matmul ffi|auto`, servers/jax/kernels).
"""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .kernels import matmul, matmul_t
from .presets import ModelArgs

Params = dict[str, Any]
Cache = tuple[tuple[jax.Array, jax.Array], ...]

DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16}


def rope_inv_freq(args: ModelArgs) -> np.ndarray:
    """[head_dim/2] inverse frequencies, with HF's "llama3" frequency scaling when configured."""
    half = args.head_dim // 2
    inv = 1.0 / (args.rope_theta ** (np.arange(0, half, dtype=np.float64) * 2.0 / args.head_dim))
    sc = args.rope_scaling
    if sc and sc.get("rope_type", sc.get("type")) == "llama3":
        factor, lo, hi = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
        old = sc["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        smooth = np.clip((old / wavelen - lo) / (hi - lo), 0.0, 1.0)
        scaled = (1 - smooth) * inv / factor + smooth * inv
        inv = np.where(wavelen < old / hi, inv, np.where(wavelen > old / lo, inv / factor, scaled))
    elif sc and sc.get("rope_type", sc.get("type")) not in (None, "default"):
        raise ValueError(f"rope_scaling type {sc.get('rope_type', sc.get('type'))!r} is not supported")
    return inv.astype(np.float32)


def apply_rope(x: jax.Array, pos: jax.Array, inv_freq: np.ndarray) -> jax.Array:
    """x [..., H, Dh] at positions pos [...] → rotated x (rotate-half convention)."""
    ang = pos.astype(jnp.float32)[..., None] * inv_freq            # [..., Dh/2]
    cos, sin = jnp.cos(ang)[..., None, :], jnp.sin(ang)[..., None, :]  # [..., 1, Dh/2]
    xf = x.astype(jnp.float32)
    x1, x2 = jnp.split(xf, 2, axis=-1)                             # [..., H, Dh/2] each
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


def rms_norm(x: jax.Array, w: jax.Array, eps: float) -> jax.Array:
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (y * w.astype(jnp.float32)).astype(x.dtype)


def init_params(args: ModelArgs, dtype: str = "fp32", seed: int = 0, std: float = 0.02) -> Params:
    """Seeded random weights with the real shapes (numpy RNG: fast, identical on every backend)."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]

    def mat(*shape: int) -> jax.Array:
        return jnp.asarray(rng.standard_normal(shape, dtype=np.float32) * std, dtype=dt)

    d, q, k, f = args.dim, args.q_dim, args.kv_dim, args.ffn_dim
    layers = []
    for _ in range(args.n_layers):
        lp = {"attn_norm": jnp.ones((d,), dt), "wqkv": mat(d, q + 2 * k), "wo": mat(q, d),
              "ffn_norm": jnp.ones((d,), dt), "w13": mat(d, 2 * f), "w2": mat(f, d)}
        if args.qkv_bias:
            lp["bqkv"] = mat(q + 2 * k)
        layers.append(lp)
    p: Params = {"embed": mat(args.vocab_size, d), "norm": jnp.ones((d,), dt), "layers": layers}
    if not args.tied_embeddings:
        p["lm_head"] = mat(d, args.vocab_size)
    return p


def _qkv(lp: dict, args: ModelArgs, h: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """h [N, D] → q [N, H, Dh], k [N, Hkv, Dh], v [N, Hkv, Dh] (before RoPE)."""
    qkv = matmul(h, lp["wqkv"])                                    # [N, Q+2K]
    if "bqkv" in lp:
        qkv = qkv + lp["bqkv"]
    q, k, v = jnp.split(qkv, [args.q_dim, args.q_dim + args.kv_dim], axis=-1)
    n = h.shape[0]
    return (q.reshape(n, args.n_heads, args.head_dim), k.reshape(n, args.n_kv_heads, args.head_dim),
            v.reshape(n, args.n_kv_heads, args.head_dim))


def _mlp(lp: dict, args: ModelArgs, x: jax.Array) -> jax.Array:
    h = rms_norm(x, lp["ffn_norm"], args.norm_eps)                 # [N, D]
    gate, up = jnp.split(matmul(h, lp["w13"]), 2, axis=-1)         # [N, F] each
    return x + matmul(jax.nn.silu(gate) * up, lp["w2"])            # [N, D]


def logits_of(params: Params, args: ModelArgs, x: jax.Array) -> jax.Array:
    """x [N, D] → fp32 logits [N, V]."""
    h = rms_norm(x, params["norm"], args.norm_eps)
    w = params.get("lm_head")
    out = matmul(h, w) if w is not None else matmul_t(h, params["embed"])
    return out.astype(jnp.float32)


def _causal_attention(args: ModelArgs, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """One sequence: q [T, H, Dh], k/v [T, Hkv, Dh] → [T, H·Dh] with a causal mask."""
    t, g = q.shape[0], args.n_heads // args.n_kv_heads
    qg = q.reshape(t, args.n_kv_heads, g, args.head_dim)           # [T, Hkv, G, Dh]
    s = jnp.einsum("tkgd,ukd->kgtu", qg, k, preferred_element_type=jnp.float32)
    s = s / math.sqrt(args.head_dim)                               # [Hkv, G, T, T]
    causal = jnp.tril(jnp.ones((t, t), bool))
    s = jnp.where(causal, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
    o = jnp.einsum("kgtu,ukd->tkgd", p, v)                         # [T, Hkv, G, Dh]
    return o.reshape(t, args.q_dim)


def prefill(params: Params, args: ModelArgs, tokens: jax.Array
            ) -> tuple[jax.Array, list[jax.Array], list[jax.Array]]:
    """tokens [T] (padding after the prompt is harmless: attention is causal) →
    hidden [T, D], ks per layer [Hkv, Dh, T], vs per layer [Hkv, T, Dh] (one cache slot's layout)."""
    inv = rope_inv_freq(args)
    t = tokens.shape[0]
    pos = jnp.arange(t)
    x = params["embed"][tokens]                                    # [T, D]
    ks, vs = [], []
    for lp in params["layers"]:
        h = rms_norm(x, lp["attn_norm"], args.norm_eps)
        q, k, v = _qkv(lp, args, h)
        q, k = apply_rope(q, pos, inv), apply_rope(k, pos, inv)
        x = x + matmul(_causal_attention(args, q, k, v), lp["wo"])
        x = _mlp(lp, args, x)
        ks.append(k.transpose(1, 2, 0))                            # [Hkv, Dh, T]
        vs.append(v.transpose(1, 0, 2))
    return x, ks, vs


def prefill_chunk(params: Params, args: ModelArgs, kv, tokens: jax.Array, offset: jax.Array):
    """Chunked prefill of one prompt. kv: per layer (k [Hkv, Dh, Tb], v [Hkv, Tb, Dh]) holding
    positions [0, offset); tokens [C] go to positions [offset, offset + C) (offset + C <= Tb).
    Returns hidden [C, D] and kv with the chunk written. Attention reads all Tb positions,
    masked to <= each query's position (so later garbage is inert)."""
    inv = rope_inv_freq(args)
    c, g = tokens.shape[0], args.n_heads // args.n_kv_heads
    tb = kv[0][0].shape[-1]
    pos = offset + jnp.arange(c)                                   # [C]
    mask = jnp.arange(tb)[None, :] <= pos[:, None]                 # [C, Tb]
    x = params["embed"][tokens]                                    # [C, D]
    out = []
    for lp, (kk, vv) in zip(params["layers"], kv):
        h = rms_norm(x, lp["attn_norm"], args.norm_eps)
        q, k, v = _qkv(lp, args, h)
        q, k = apply_rope(q, pos, inv), apply_rope(k, pos, inv)
        kk = jax.lax.dynamic_update_slice(kk, k.transpose(1, 2, 0), (0, 0, offset))  # [Hkv, Dh, Tb]
        vv = jax.lax.dynamic_update_slice(vv, v.transpose(1, 0, 2), (0, offset, 0))  # [Hkv, Tb, Dh]
        out.append((kk, vv))
        qg = q.reshape(c, args.n_kv_heads, g, args.head_dim)       # [C, Hkv, G, Dh]
        sc = jnp.einsum("ckgd,kdt->kgct", qg, kk, preferred_element_type=jnp.float32)
        sc = jnp.where(mask, sc / math.sqrt(args.head_dim), -jnp.inf)   # [Hkv, G, C, Tb]
        p = jax.nn.softmax(sc, axis=-1).astype(vv.dtype)
        o = jnp.einsum("kgct,ktd->ckgd", p, vv).reshape(c, args.q_dim)
        x = x + matmul(o, lp["wo"])
        x = _mlp(lp, args, x)
    return x, tuple(out)


def chunk_offsets(n: int, chunk: int, tb: int) -> list[int]:
    """Chunk starts covering [0, n) inside a bucket of tb; the last may overlap the one before
    (re-writing identical K/V) so that no chunk runs past tb."""
    return [min(o, tb - chunk) for o in range(0, n, chunk)]


def forward_reference(params: Params, args: ModelArgs, tokens: jax.Array) -> jax.Array:
    """tokens [T] → fp32 logits [T, V]; full causal attention, no cache (the tests' oracle)."""
    x, _, _ = prefill(params, args, tokens)
    return logits_of(params, args, x)


def init_cache(args: ModelArgs, slots: int, max_len: int, dtype: str) -> Cache:
    kshape = (slots, args.n_kv_heads, args.head_dim, max_len)      # K transposed
    vshape = (slots, args.n_kv_heads, max_len, args.head_dim)
    return tuple((jnp.zeros(kshape, DTYPES[dtype]), jnp.zeros(vshape, DTYPES[dtype]))
                 for _ in range(args.n_layers))


def insert_prefix(cache: Cache, kv, slot) -> Cache:
    """kv: per layer (k [Hkv, Dh, Tb], v [Hkv, Tb, Dh]) → written at positions [0, Tb) of slot."""
    return tuple((jax.lax.dynamic_update_slice(kc, k[None], (slot, 0, 0, 0)),
                  jax.lax.dynamic_update_slice(vc, v[None], (slot, 0, 0, 0)))
                 for (kc, vc), (k, v) in zip(cache, kv))


def cache_bytes(args: ModelArgs, slots: int, max_len: int, dtype: str) -> int:
    return 2 * args.n_layers * slots * args.n_kv_heads * max_len * args.head_dim * (4 if dtype == "fp32" else 2)


def _write_k(kc: jax.Array, k: jax.Array, rows: jax.Array, pos: jax.Array) -> jax.Array:
    """kc [S, Hkv, Dh, T] ← k [B, Hkv, Dh] at (rows[b], pos[b]). For B == 1 the index is given
    twice: XLA:CPU turns a one-row scatter into a dynamic-update-slice and then copies the whole
    cache every step (seen in the optimised HLO); a two-row scatter stays in place."""
    if k.shape[0] == 1:
        rows, pos, k = jnp.concatenate([rows, rows]), jnp.concatenate([pos, pos]), jnp.concatenate([k, k])
    return kc.at[rows, :, :, pos].set(k)


def decode(params: Params, args: ModelArgs, cache: Cache, tokens: jax.Array, pos: jax.Array,
           attn_len: int, chunk=None):
    """One token for each of the first B slots. tokens/pos [B], B <= cache slots (pos = where this
    token goes = current length). Writes each slot's new K/V at pos, attends over cache positions
    [0, attn_len) masked to <= pos. Cost: the attention reads B·attn_len·2·Hkv·Dh values per layer,
    so attn_len is a bucket just above the longest active sequence, not max_len, and B a bucket
    just above the highest active slot. Returns fp32 logits [B, V] and the whole cache.

    chunk = (ctoks [C], cslot, coff): also prefill C prompt tokens of the sequence in slot cslot,
    positions [coff, coff + C) (vLLM's chunked prefill): their rows join the decode rows in every
    matmul, so the weights are read once for both; their K/V go straight into cslot's cache rows
    and they attend to cslot's positions <= their own (attn_len must cover coff + C). Then the
    return is (logits [B, V], hidden [C, D] of the chunk rows, cache)."""
    inv = rope_inv_freq(args)
    s_, g = tokens.shape[0], args.n_heads // args.n_kv_heads
    c = 0 if chunk is None else chunk[0].shape[0]
    rows = jnp.arange(s_)
    x = params["embed"][tokens]                                    # [B, D]
    allpos = pos
    if chunk is not None:
        ctoks, cslot, coff = chunk
        cpos = coff + jnp.arange(c)                                # [C]
        x = jnp.concatenate([x, params["embed"][ctoks]])           # [B + C, D]
        allpos = jnp.concatenate([pos, cpos])
        cvalid = jnp.arange(attn_len)[None, :] <= cpos[:, None]    # [C, A]
    valid = jnp.arange(attn_len)[None, :] <= pos[:, None]          # [B, A]
    new_cache = []
    for lp, (kc, vc) in zip(params["layers"], cache):
        h = rms_norm(x, lp["attn_norm"], args.norm_eps)
        q, k, v = _qkv(lp, args, h)                                # [B+C, H|Hkv, Dh]
        q, k = apply_rope(q, allpos, inv), apply_rope(k, allpos, inv)
        kc = _write_k(kc, k[:s_], rows, pos)                       # [S, Hkv, Dh, T] at (b, pos[b])
        vc = vc.at[rows, :, pos, :].set(v[:s_])                    # [S, Hkv, T, Dh]
        if chunk is not None:                                      # after: the chunk's rows win
            # scatters, not dynamic_update_slice: XLA:CPU would copy the whole cache for the latter
            # (advanced indices apart: the update is [C, Hkv, Dh] for both layouts)
            kc = kc.at[cslot, :, :, cpos].set(k[s_:])
            vc = vc.at[cslot, :, cpos, :].set(v[s_:])
        new_cache.append((kc, vc))
        ka, va = kc[:s_, :, :, :attn_len], vc[:s_, :, :attn_len, :]  # [B, Hkv, Dh, A], [B, Hkv, A, Dh]
        qg = q[:s_].reshape(s_, args.n_kv_heads, g, args.head_dim)  # [B, Hkv, G, Dh]
        # fused multiply + reduce over Dh (middle axis), vectorised along A
        sc = jnp.sum(qg[..., None].astype(jnp.float32) * ka[:, :, None].astype(jnp.float32), axis=-2)
        sc = jnp.where(valid[:, None, None, :], sc / math.sqrt(args.head_dim), -jnp.inf)  # [B, Hkv, G, A]
        p = jax.nn.softmax(sc, axis=-1).astype(va.dtype)           # [B, Hkv, G, A]
        o = jnp.einsum("skga,skad->skgd", p, va).reshape(s_, args.q_dim)
        if chunk is not None:
            kz = jax.lax.dynamic_slice_in_dim(kc, cslot, 1, 0)[0, :, :, :attn_len]   # [Hkv, Dh, A]
            vz = jax.lax.dynamic_slice_in_dim(vc, cslot, 1, 0)[0, :, :attn_len, :]   # [Hkv, A, Dh]
            qc = q[s_:].reshape(c, args.n_kv_heads, g, args.head_dim)              # [C, Hkv, G, Dh]
            scc = jnp.einsum("ckgd,kda->kgca", qc, kz, preferred_element_type=jnp.float32)
            scc = jnp.where(cvalid, scc / math.sqrt(args.head_dim), -jnp.inf)       # [Hkv, G, C, A]
            pc = jax.nn.softmax(scc, axis=-1).astype(vz.dtype)
            oc = jnp.einsum("kgca,kad->ckgd", pc, vz).reshape(c, args.q_dim)
            o = jnp.concatenate([o, oc])                                            # [B + C, Q]
        x = x + matmul(o, lp["wo"])
        x = _mlp(lp, args, x)
    if chunk is None:
        return logits_of(params, args, x), tuple(new_cache)
    return logits_of(params, args, x[:s_]), x[s_:], tuple(new_cache)
