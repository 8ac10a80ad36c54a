"""Cost arithmetic of a decoder-only transformer: bytes and FLOPs of one decode step or a prefill.

    shape dict (JAX server /info "model", or any dict with the keys below)
        ─► param_count / weight_bytes / kv_bytes_per_token
        ─► decode_step_bytes, decode_step_flops, prefill_flops   (evidence: calculated)
        ─► decode_gemv_list ─► the kernel harness times the same (M, K, N) shapes

Shape keys: n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, tied_embeddings,
dtype_bytes (or dtype "fp32"/"bf16"), optionally n_params. Plain arithmetic (FMA = 2 FLOPs); a
gated MLP (gate, up, down) and grouped-query attention are assumed, as in Llama and Qwen.
Norm weights, biases, rotary embedding, softmax and sampling are left out of the FLOPs (they are
O(dim) per token against O(dim^2)).
"""
from __future__ import annotations

DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}


def dtype_bytes(shape: dict) -> int:
    """Bytes per weight / cache element: shape["dtype_bytes"], else from shape["dtype"]."""
    if shape.get("dtype_bytes"):
        return int(shape["dtype_bytes"])
    return DTYPE_BYTES[shape.get("dtype", "bf16")]


def _q_dim(s: dict) -> int:
    return s["n_heads"] * s["head_dim"]


def _kv_dim(s: dict) -> int:
    return s["n_kv_heads"] * s["head_dim"]


def layer_matmul_params(shape: dict) -> int:
    """Weights of one block's projections: Wq [d, H*hd], Wk and Wv [d, Hkv*hd], Wo [H*hd, d],
    gate and up [d, ffn], down [ffn, d] → d*(H*hd + 2*Hkv*hd) + H*hd*d + 3*d*ffn."""
    d, f = shape["dim"], shape["ffn_dim"]
    return d * (_q_dim(shape) + 2 * _kv_dim(shape)) + _q_dim(shape) * d + 3 * d * f


def matmul_params(shape: dict) -> int:
    """Weights that take part in a matmul per token: n_layers * layer + LM head (vocab * d).
    The embedding lookup is a gather, not a matmul; with tied embeddings the LM head is that table."""
    return shape["n_layers"] * layer_matmul_params(shape) + shape["vocab_size"] * shape["dim"]


def param_count(shape: dict) -> int:
    """All parameters: matmul weights + embedding table (when untied) + 2 norms per layer + final
    norm. Used when the shape dict carries no n_params."""
    d = shape["dim"]
    n = matmul_params(shape) + (2 * shape["n_layers"] + 1) * d
    if not shape.get("tied_embeddings", False):
        n += shape["vocab_size"] * d
    return n


def weight_bytes(shape: dict) -> int:
    """Bytes of all weights = n_params * dtype_bytes (n_params from the shape when given)."""
    return int(shape.get("n_params") or param_count(shape)) * dtype_bytes(shape)


def kv_bytes_per_token(shape: dict) -> int:
    """K and V for one position in every layer: 2 * n_layers * n_kv_heads * head_dim * dtype_bytes."""
    return 2 * shape["n_layers"] * _kv_dim(shape) * dtype_bytes(shape)


def decode_step_bytes(shape: dict, batch: int, context_len: int) -> int:
    """Least bytes one decode step moves through device memory, for ``batch`` sequences that each
    attend ``context_len`` cached positions (the new one included):

        weights read once      = weight_bytes - (untied ? vocab*d*bytes : 0)   (embedding: gathered)
      + embedding rows gathered = batch * d * bytes
      + K/V read               = batch * context_len * kv_bytes_per_token
      + K/V of the new token   = batch * kv_bytes_per_token                    (written)

    Activations are left out (O(batch * d) per layer)."""
    b = dtype_bytes(shape)
    w = weight_bytes(shape)
    if not shape.get("tied_embeddings", False):
        w -= shape["vocab_size"] * shape["dim"] * b
    kv = kv_bytes_per_token(shape)
    return w + batch * shape["dim"] * b + batch * context_len * kv + batch * kv


def decode_step_flops(shape: dict, batch: int, context_len: int) -> int:
    """FLOPs of one decode step: 2 * batch * matmul_params (every weight once per token)
    + attention 4 * n_layers * n_heads * head_dim * context_len per token (QK^T and AV)."""
    attn = 4 * shape["n_layers"] * _q_dim(shape) * context_len
    return batch * (2 * matmul_params(shape) + attn)


def prefill_flops(shape: dict, n_tokens: int) -> int:
    """FLOPs to prefill n tokens with causal attention: 2 * n * matmul_params
    + sum over positions i = 1..n of 4 * L * H * hd * i = 2 * L * H * hd * n * (n + 1)."""
    attn = 2 * shape["n_layers"] * _q_dim(shape) * n_tokens * (n_tokens + 1)
    return 2 * n_tokens * matmul_params(shape) + attn


def decode_gemv_list(shape: dict, batch: int) -> list[tuple[str, int, int, int]]:
    """The matrix products of one decode step as (name, M, K, N), Y[M, N] = X[M, K] W[K, N], M = batch:
    per layer qkv (K = d, N = (H + 2 Hkv) hd), o (K = H hd, N = d), gate_up (K = d, N = 2 ffn),
    down (K = ffn, N = d); then lm_head (K = d, N = vocab). Names are "L{i}.qkv", ..., "lm_head"."""
    d, f = shape["dim"], shape["ffn_dim"]
    per_layer = [("qkv", d, _q_dim(shape) + 2 * _kv_dim(shape)), ("o", _q_dim(shape), d),
                 ("gate_up", d, 2 * f), ("down", f, d)]
    out = [(f"L{i}.{name}", batch, k, n)
           for i in range(shape["n_layers"]) for name, k, n in per_layer]
    out.append(("lm_head", batch, d, shape["vocab_size"]))
    return out


def gemm_min_bytes(m: int, k: int, n: int, elem_bytes: int, bias: bool = False) -> int:
    """Q_min of Y = X W (+ b): X, W (and b) read once, Y written once (the seed's convention)."""
    return (m * k + k * n + (n if bias else 0) + m * n) * elem_bytes
