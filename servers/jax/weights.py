"""Load a local Hugging Face-format model directory (config.json + *.safetensors) into our pytree.

Supported: ``LlamaForCausalLM`` (model_type "llama") and ``Qwen2ForCausalLM`` ("qwen2": q/k/v
biases), tied or untied embeddings, "llama3" RoPE scaling. Nothing is downloaded; a missing or
unsupported directory raises ``ModelDirError`` (a ValueError) with a one-line message.

HF name (torch Linear weights are [out, in])            → ours ([in, out])
  model.embed_tokens.weight [V, D]                      → embed [V, D]
  model.layers.i.input_layernorm.weight                 → layers[i].attn_norm
  model.layers.i.self_attn.{q,k,v}_proj.weight/.bias    → layers[i].wqkv [D, Q+2K] / bqkv
  model.layers.i.self_attn.o_proj.weight [D, Q]         → layers[i].wo [Q, D]
  model.layers.i.post_attention_layernorm.weight        → layers[i].ffn_norm
  model.layers.i.mlp.{gate,up}_proj.weight [F, D]       → layers[i].w13 [D, 2F]
  model.layers.i.mlp.down_proj.weight [D, F]            → layers[i].w2 [F, D]
  model.norm.weight, lm_head.weight [V, D]              → norm, lm_head [D, V] (absent when tied)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax.numpy as jnp

from .model import DTYPES, Params
from .presets import ModelArgs

SUPPORTED = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}


class ModelDirError(ValueError):
    """A model directory that is missing, incomplete or of an unsupported architecture."""


def read_config(model_dir: str | Path) -> dict:
    d = Path(model_dir)
    if not d.is_dir():
        raise ModelDirError(f"model directory {str(d)!r} does not exist")
    cfg_path = d / "config.json"
    if not cfg_path.is_file():
        raise ModelDirError(f"{cfg_path} not found (expected a Hugging Face model directory)")
    try:
        return json.loads(cfg_path.read_text())
    except json.JSONDecodeError as e:
        raise ModelDirError(f"{cfg_path} is not valid JSON: {e}") from None


def args_from_config(cfg: dict, name: str) -> ModelArgs:
    archs = cfg.get("architectures") or []
    kind = next((SUPPORTED[a] for a in archs if a in SUPPORTED), None)
    if kind is None and cfg.get("model_type") in SUPPORTED.values():
        kind = cfg["model_type"]
    if kind is None:
        raise ModelDirError(f"unsupported architecture {archs or cfg.get('model_type')!r}; "
                            f"supported: {', '.join(SUPPORTED)}")
    if cfg.get("mlp_bias") or (kind == "llama" and cfg.get("attention_bias")):
        raise ModelDirError("config.json asks for attention_bias/mlp_bias, which is not supported")
    try:
        n_heads = int(cfg["num_attention_heads"])
        dim = int(cfg["hidden_size"])
        return ModelArgs(
            name=name, dim=dim, n_layers=int(cfg["num_hidden_layers"]), n_heads=n_heads,
            n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
            ffn_dim=int(cfg["intermediate_size"]), vocab_size=int(cfg["vocab_size"]),
            head_dim=int(cfg.get("head_dim") or dim // n_heads),
            norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            rope_theta=float(cfg.get("rope_theta", 10000.0)),
            rope_scaling=cfg.get("rope_scaling"),
            tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=kind == "qwen2",
            max_position=int(cfg.get("max_position_embeddings", 4096)))
    except KeyError as e:
        raise ModelDirError(f"config.json lacks {e.args[0]!r}") from None


def eos_ids_from_config(cfg: dict) -> set[int]:
    e = cfg.get("eos_token_id")
    if e is None:
        return set()
    return {int(x) for x in (e if isinstance(e, list) else [e])}


def _read_tensors(d: Path) -> dict[str, Any]:
    from safetensors import safe_open

    files = sorted(d.glob("*.safetensors"))
    if not files:
        raise ModelDirError(f"no *.safetensors files in {d}")
    out: dict[str, Any] = {}
    for f in files:
        with safe_open(str(f), framework="flax") as fh:        # flax → jax arrays (bf16 ok)
            for k in fh.keys():
                out[k] = fh.get_tensor(k)
    return out


def load_params(model_dir: str | Path, args: ModelArgs, dtype: str) -> Params:
    d = Path(model_dir)
    t = _read_tensors(d)
    dt = DTYPES[dtype]

    def get(name: str):
        if name not in t:
            raise ModelDirError(f"tensor {name!r} missing from the safetensors files in {d}")
        return jnp.asarray(t.pop(name), dtype=dt)

    layers = []
    for i in range(args.n_layers):
        p = f"model.layers.{i}."
        q, k, v = (get(p + f"self_attn.{n}_proj.weight") for n in "qkv")
        lp = {"attn_norm": get(p + "input_layernorm.weight"),
              "wqkv": jnp.concatenate([q.T, k.T, v.T], axis=1),          # [D, Q+2K]
              "wo": get(p + "self_attn.o_proj.weight").T,                 # [Q, D]
              "ffn_norm": get(p + "post_attention_layernorm.weight"),
              "w13": jnp.concatenate([get(p + "mlp.gate_proj.weight").T,
                                      get(p + "mlp.up_proj.weight").T], axis=1),  # [D, 2F]
              "w2": get(p + "mlp.down_proj.weight").T}                    # [F, D]
        if args.qkv_bias:
            lp["bqkv"] = jnp.concatenate([get(p + f"self_attn.{n}_proj.bias") for n in "qkv"])
        layers.append(lp)
    params: Params = {"embed": get("model.embed_tokens.weight"), "norm": get("model.norm.weight"),
                      "layers": layers}
    if not args.tied_embeddings:
        params["lm_head"] = get("lm_head.weight").T                      # [D, V]
    want = (args.vocab_size, args.dim)
    if tuple(params["embed"].shape) != want:
        raise ModelDirError(f"embed_tokens has shape {tuple(params['embed'].shape)}, config says {want}")
    return params


def load_model_dir(model_dir: str | Path, dtype: str) -> tuple[ModelArgs, Params, dict]:
    """→ (args, params, config dict). Raises ModelDirError with a one-line reason."""
    d = Path(model_dir)
    cfg = read_config(d)
    args = args_from_config(cfg, name=d.name)
    return args, load_params(d, args, dtype), cfg
