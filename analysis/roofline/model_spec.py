"""A model's shape dict from a Hugging Face config.json (or the JAX server's /info description).

    config.json (dict or path to the file / its directory) ─► from_hf_config ─► shape dict
    sut.json (server_info "model")                         ─► shape_in_sut
    shape dict ─► model_cost (bytes, FLOPs) ─► roofline

The shape dict is the one the JAX server publishes under /info "model":
{"name", "n_layers", "dim", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab_size",
"tied_embeddings", "n_params", "dtype", "dtype_bytes", "max_model_len", "slots"}.
Evidence: documented (the checkpoint's own config.json). n_params is calculated from the shape
(model_cost.param_count, plus the q/k/v biases of Qwen2-style attention). Fields a config.json does
not carry (slots) stay None; a required key that is missing raises ``ModelSpecError`` naming it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from analysis.roofline import model_cost

HF_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16",
             "fp32": "fp32", "bf16": "bf16", "fp16": "fp16"}
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
            "vocab_size")


class ModelSpecError(ValueError):
    """A config.json that cannot give a shape; ``str()`` is one line naming the problem."""


def read_hf_config(path: str | Path) -> dict:
    """The JSON of ``path`` (a config.json, or a model directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise ModelSpecError(f"{p}: no such file (expected a Hugging Face config.json)")
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ModelSpecError(f"{p}: not valid JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(cfg, dict):
        raise ModelSpecError(f"{p}: top level must be an object")
    return cfg


def _dtype(cfg: dict, override: Optional[str]) -> str:
    raw = override or cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    try:
        return HF_DTYPES[str(raw).removeprefix("torch.")]
    except KeyError:
        raise ModelSpecError(f"dtype: {raw!r} is not one of {', '.join(sorted(HF_DTYPES))}") \
            from None


def _qkv_bias(cfg: dict) -> bool:
    """Qwen2 projections carry q/k/v biases by architecture; Llama only with attention_bias."""
    return cfg.get("model_type") == "qwen2" or bool(cfg.get("attention_bias"))


def from_hf_config(config: dict | str | Path, *, name: Optional[str] = None,
                   dtype: Optional[str] = None, max_model_len: Optional[int] = None,
                   slots: Optional[int] = None) -> dict:
    """The shape dict of a decoder-only transformer described by a HF config.json.

    ``dtype`` overrides the config's torch_dtype (the server may cast); ``max_model_len``
    defaults to max_position_embeddings; ``slots`` (the server's decode batch) is not in a
    config.json and stays None unless given.
    """
    cfg = config if isinstance(config, dict) else read_hf_config(config)
    missing = [k for k in REQUIRED if cfg.get(k) is None]
    if missing:
        raise ModelSpecError(f"config.json lacks {', '.join(missing)}")
    dim, n_heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    dt = _dtype(cfg, dtype)
    if name is None:
        name = cfg.get("_name_or_path") or (None if isinstance(config, dict) else
                                            Path(config).resolve().parent.name
                                            if Path(config).is_file() else Path(config).name)
    shape = {
        "name": name or cfg.get("model_type") or "unnamed",
        "n_layers": int(cfg["num_hidden_layers"]), "dim": dim, "n_heads": n_heads,
        "n_kv_heads": int(cfg.get("num_key_value_heads") or n_heads),
        "head_dim": int(cfg.get("head_dim") or dim // n_heads),
        "ffn_dim": int(cfg["intermediate_size"]), "vocab_size": int(cfg["vocab_size"]),
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "dtype": dt, "dtype_bytes": model_cost.DTYPE_BYTES[dt],
        "max_model_len": int(max_model_len or cfg.get("max_position_embeddings") or 0) or None,
        "slots": slots,
    }
    if shape["n_heads"] % shape["n_kv_heads"]:
        raise ModelSpecError(f"num_attention_heads {n_heads} is not a multiple of "
                             f"num_key_value_heads {shape['n_kv_heads']}")
    n = model_cost.param_count(shape)
    if _qkv_bias(cfg):
        n += shape["n_layers"] * (shape["n_heads"] + 2 * shape["n_kv_heads"]) * shape["head_dim"]
    shape["n_params"] = n
    return shape


def shape_in_sut(sut: dict) -> Optional[dict]:
    """The first dict in sut.json that looks like a model shape (has n_layers and dim), searched
    breadth-first (JAX /info puts it under "model"; a top-level "model" may be just a name)."""
    level = [sut]
    while level:
        nxt = []
        for node in level:
            if isinstance(node, dict):
                if "n_layers" in node and "dim" in node:
                    return node
                nxt.extend(v for v in node.values() if isinstance(v, (dict, list)))
            elif isinstance(node, list):
                nxt.extend(v for v in node if isinstance(v, (dict, list)))
        level = nxt
    return None
