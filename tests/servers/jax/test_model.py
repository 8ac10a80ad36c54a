"""The model functions: parameter counts, RoPE scaling, prefill/decode consistency, presets."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from servers.jax import model as M
from servers.jax.presets import PRESETS, ModelArgs, get_preset, shape_dict

TINY = get_preset("tiny")


def test_n_params_counts_every_leaf():
    for a in (TINY, TINY.replace(tied_embeddings=True, qkv_bias=True, name="t2")):
        p = M.init_params(a, "fp32", seed=0)
        assert sum(x.size for x in jax.tree_util.tree_leaves(p)) == a.n_params()
    # published sizes (documented): Llama-3.2-1B ≈ 1.24B, Qwen2.5-0.5B ≈ 0.49B
    assert round(PRESETS["llama-3.2-1b"].n_params() / 1e9, 2) == 1.24
    assert round(PRESETS["qwen2.5-0.5b"].n_params() / 1e9, 2) == 0.49
    assert 100e6 < PRESETS["small"].n_params() < 130e6


def test_shape_dict_and_presets():
    d = shape_dict(TINY, "fp32", 128, 4)
    assert set(d) == {"name", "n_layers", "dim", "n_heads", "n_kv_heads", "head_dim", "ffn_dim",
                      "vocab_size", "tied_embeddings", "n_params", "dtype", "dtype_bytes",
                      "max_model_len", "slots"}
    assert d["dtype_bytes"] == 4 and shape_dict(TINY, "bf16", 1, 1)["dtype_bytes"] == 2
    with pytest.raises(ValueError, match="unknown preset"):
        get_preset("huge")
    with pytest.raises(ValueError, match="multiple"):
        ModelArgs("bad", dim=64, n_layers=1, n_heads=4, n_kv_heads=3, ffn_dim=8, vocab_size=8)


def test_llama3_rope_scaling():
    a = PRESETS["llama-3.2-1b"]
    plain = M.rope_inv_freq(a.replace(rope_scaling=None))
    scaled = M.rope_inv_freq(a)
    assert scaled[0] == pytest.approx(plain[0])                  # high frequencies untouched
    assert scaled[-1] == pytest.approx(plain[-1] / 32.0)        # low frequencies / factor
    assert np.all(scaled <= plain + 1e-12)
    with pytest.raises(ValueError, match="not supported"):
        M.rope_inv_freq(a.replace(rope_scaling={"rope_type": "yarn"}))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_prefill_then_decode_equals_reference_logits():
    p = M.init_params(TINY, "fp32", seed=1, std=0.2)
    toks = np.array([3, 9, 27, 81, 243, 217, 139], np.int32)     # 7 tokens
    ref = jax.jit(lambda p, t: M.forward_reference(p, TINY, t))(p, toks)   # [7, V]
    n, slots, max_len = 5, 2, 16

    @jax.jit
    def run(p):
        _, ks, vs = M.prefill(p, TINY, jnp.asarray(toks[:n]))     # cache positions [0, n)
        cache = M.init_cache(TINY, slots, max_len, "fp32")
        cache = M.insert_prefix(cache, tuple(zip(ks, vs)), 1)
        l5, cache = M.decode(p, TINY, cache, jnp.array([0, toks[5]]), jnp.array([0, 5]), 8)
        l6, _ = M.decode(p, TINY, cache, jnp.array([0, toks[6]]), jnp.array([0, 6]), 8)
        return l5[1], l6[1]

    l5, l6 = run(p)
    np.testing.assert_allclose(np.asarray(l5), np.asarray(ref[5]), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(l6), np.asarray(ref[6]), rtol=1e-4, atol=1e-4)
    assert M.cache_bytes(TINY, slots, max_len, "fp32") == sum(
        x.nbytes for x in jax.tree_util.tree_leaves(M.init_cache(TINY, slots, max_len, "fp32")))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_chunked_prefill_equals_reference_including_overlapping_last_chunk():
    p = M.init_params(TINY, "fp32", seed=2, std=0.2)
    n, chunk, tb = 19, 8, 20                                      # offsets 0, 8, 12 (clamped)
    toks = np.random.default_rng(0).integers(0, TINY.vocab_size, tb).astype(np.int32)
    assert M.chunk_offsets(n, chunk, tb) == [0, 8, 12]
    ref = jax.jit(lambda p, t: M.forward_reference(p, TINY, t))(p, toks[:n])   # [n, V]
    step = jax.jit(lambda p, kv, t, o: M.prefill_chunk(p, TINY, kv, t, o))
    kv = tuple((jnp.zeros((TINY.n_kv_heads, TINY.head_dim, tb)), jnp.zeros((TINY.n_kv_heads, tb, TINY.head_dim)))
               for _ in range(TINY.n_layers))
    for off in M.chunk_offsets(n, chunk, tb):
        x, kv = step(p, kv, toks[off:off + chunk], off)
    last = M.logits_of(p, TINY, x[n - 1 - 12][None])[0]
    np.testing.assert_allclose(np.asarray(last), np.asarray(ref[n - 1]), rtol=1e-4, atol=1e-4)
    _, ks, _ = M.prefill(p, TINY, jnp.asarray(toks[:n]))
    np.testing.assert_allclose(np.asarray(kv[1][0][:, :, :n]), np.asarray(ks[1]), rtol=1e-4, atol=1e-4)
