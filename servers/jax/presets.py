"""Model architecture: the ``ModelArgs`` dataclass and a table of named presets.

Synthetic presets get seeded random weights (like vLLM's ``--load-format dummy``): the shapes, and so
the bytes and FLOPs per token, are real; the text is noise. Real-shape presets copy the published
config.json values of the named checkpoints (documented: Hugging Face model cards' config.json).

    preset          params   dim  layers heads kv  ffn    vocab   tied  qkv_bias  rope_theta
    tiny           ~3.41M    256    4     8    4   768    512     no    no        10000
    small          ~124.7M   768   12    12    4   2048   32000   no    no        10000
    llama-3.2-1b   ~1.24B   2048   16    32    8   8192   128256  yes   no        500000 (+llama3 scaling)
    qwen2.5-0.5b   ~494M     896   24    14    2   4864   151936  yes   yes       1000000

``small`` is ~125M params (≈ 499 MB fp32, ≈ 400 MB read per decode step since only one embedding
row is gathered): far beyond the 32 MiB L3 here, so batch-1 decode is bandwidth-bound.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class ModelArgs:
    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    head_dim: int = 0                     # 0 → dim // n_heads
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = field(default=None, hash=False, compare=False)  # HF "llama3" dict
    tied_embeddings: bool = False
    qkv_bias: bool = False
    max_position: int = 8192

    def __post_init__(self) -> None:
        if self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.dim // self.n_heads)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    def n_params(self) -> int:
        """All parameters (embedding and head counted separately unless tied)."""
        d, f = self.dim, self.ffn_dim
        attn = d * self.q_dim + 2 * d * self.kv_dim + self.q_dim * d
        if self.qkv_bias:
            attn += self.q_dim + 2 * self.kv_dim
        layer = attn + 3 * d * f + 2 * d
        emb = self.vocab_size * d
        return self.n_layers * layer + emb + d + (0 if self.tied_embeddings else emb)

    def replace(self, **kw) -> "ModelArgs":
        return dataclasses.replace(self, **kw)


PRESETS: dict[str, ModelArgs] = {
    "tiny": ModelArgs("tiny", dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=768,
                      vocab_size=512, max_position=4096),
    "small": ModelArgs("small", dim=768, n_layers=12, n_heads=12, n_kv_heads=4, ffn_dim=2048,
                       vocab_size=32000, max_position=8192),
    # meta-llama/Llama-3.2-1B config.json
    "llama-3.2-1b": ModelArgs("llama-3.2-1b", dim=2048, n_layers=16, n_heads=32, n_kv_heads=8,
                              ffn_dim=8192, vocab_size=128256, head_dim=64, norm_eps=1e-5,
                              rope_theta=500000.0, tied_embeddings=True, max_position=131072,
                              rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 8192}),
    # Qwen/Qwen2.5-0.5B config.json
    "qwen2.5-0.5b": ModelArgs("qwen2.5-0.5b", dim=896, n_layers=24, n_heads=14, n_kv_heads=2,
                              ffn_dim=4864, vocab_size=151936, head_dim=64, norm_eps=1e-6,
                              rope_theta=1000000.0, tied_embeddings=True, qkv_bias=True,
                              max_position=32768),
}


def get_preset(name: str) -> ModelArgs:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def shape_dict(args: ModelArgs, dtype: str, max_model_len: int, slots: int) -> dict:
    """The model shape dict of /info's "model" key (the cost arithmetic in analysis/ reads it)."""
    return {
        "name": args.name, "n_layers": args.n_layers, "dim": args.dim, "n_heads": args.n_heads,
        "n_kv_heads": args.n_kv_heads, "head_dim": args.head_dim, "ffn_dim": args.ffn_dim,
        "vocab_size": args.vocab_size, "tied_embeddings": args.tied_embeddings,
        "n_params": args.n_params(), "dtype": dtype, "dtype_bytes": 4 if dtype == "fp32" else 2,
        "max_model_len": int(max_model_len), "slots": int(slots),
    }
