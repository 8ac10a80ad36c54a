"""Cost arithmetic against hand-computed numbers."""
import pytest

from analysis.roofline import model_cost as mc

# 2 layers, d=8, 2 heads (hd 4), 1 KV head, ffn 16, vocab 32, untied, fp32
SHAPE = {"name": "hand", "n_layers": 2, "dim": 8, "n_heads": 2, "n_kv_heads": 1, "head_dim": 4,
         "ffn_dim": 16, "vocab_size": 32, "tied_embeddings": False, "dtype": "fp32", "dtype_bytes": 4}


def test_params_by_hand():
    # layer: 8*(8 + 2*4) + 8*8 + 3*8*16 = 128 + 64 + 384
    assert mc.layer_matmul_params(SHAPE) == 576
    assert mc.matmul_params(SHAPE) == 2 * 576 + 32 * 8 == 1408
    # + norms (2*2 + 1) * 8 + untied embedding 256
    assert mc.param_count(SHAPE) == 1408 + 40 + 256 == 1704
    assert mc.weight_bytes(SHAPE) == 6816
    assert mc.weight_bytes(dict(SHAPE, n_params=1000)) == 4000      # the shape's count wins
    assert mc.param_count(dict(SHAPE, tied_embeddings=True)) == 1448


def test_small_preset_shape_param_count():
    # the JAX server's "small" preset shape: ~124.7M (servers/jax/presets.py docstring)
    small = {"n_layers": 12, "dim": 768, "n_heads": 12, "n_kv_heads": 4, "head_dim": 64,
             "ffn_dim": 2048, "vocab_size": 32000, "tied_embeddings": False, "dtype": "fp32"}
    assert mc.param_count(small) == 124_668_672


def test_kv_and_decode_bytes():
    assert mc.kv_bytes_per_token(SHAPE) == 2 * 2 * 4 * 4 == 64
    # weights minus the untied table (5792) + 3 rows (96) + K/V read 3*10*64 + written 3*64
    assert mc.decode_step_bytes(SHAPE, 3, 10) == 5792 + 96 + 1920 + 192 == 8000
    tied = dict(SHAPE, tied_embeddings=True)     # the LM head reads the (only) table
    assert mc.decode_step_bytes(tied, 1, 0) == 1448 * 4 + 32 + 64
    assert mc.decode_step_bytes(dict(SHAPE, dtype="bf16", dtype_bytes=2), 3, 10) == 4000


def test_flops():
    # 3 * (2 * 1408 + 4 * 2 layers * 8 q_dim * 10)
    assert mc.decode_step_flops(SHAPE, 3, 10) == 3 * (2816 + 640) == 10368
    # 2*5*1408 + 2 * 2 * 8 * 5 * 6
    assert mc.prefill_flops(SHAPE, 5) == 14080 + 960 == 15040
    assert mc.prefill_flops(SHAPE, 1) == mc.decode_step_flops(SHAPE, 1, 1)


def test_gemv_list():
    g = mc.decode_gemv_list(SHAPE, 3)
    assert len(g) == 2 * 4 + 1
    assert g[:4] == [("L0.qkv", 3, 8, 16), ("L0.o", 3, 8, 8), ("L0.gate_up", 3, 8, 32),
                     ("L0.down", 3, 16, 8)]
    assert g[-1] == ("lm_head", 3, 8, 32)
    # every matmul weight appears once per step
    assert sum(k * n for _, _, k, n in g) == mc.matmul_params(SHAPE)
    assert mc.gemm_min_bytes(1, 1024, 1024, 4, bias=True) == 4_206_592


def test_dtype_bytes():
    assert mc.dtype_bytes({"dtype": "bf16"}) == 2
    with pytest.raises(KeyError):
        mc.dtype_bytes({"dtype": "int3"})
