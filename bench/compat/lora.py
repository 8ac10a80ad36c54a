"""Two LoRA adapters with random weights for the compat model (small-hf), made here: no download, no peft.

    small-hf's shapes (bench/compat/models.py SHAPES)
        ─► adapter_config.json (PEFT's LoRA keys: r, lora_alpha, target_modules q_proj v_proj)
        ─► adapter_model.safetensors  base_model.model.model.layers.{i}.self_attn.{q,v}_proj.lora_{A,B}.weight
           A: (r, in) N(0, 0.02), B: (out, r) N(0, 0.02), seeded per adapter (B is not zero: each adapter
           changes the output, so the two answers differ from the base model's)
        ─► <cache>/models/lora-a/, <cache>/models/lora-b/

vLLM serves them with ``--enable-lora --max-lora-rank 8 --lora-modules a=<dir> b=<dir>`` (the
``lora`` variant of bench/compat/servers.py): /v1/models lists ``a`` and ``b`` beside the base model.

Run: ``python -m bench.compat.lora`` (prints the paths).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from bench.compat.models import SHAPES, hf_dir, make_hf
from bench.compat.paths import cache_dir

RECIPE = "lora-v1"
RANK = 8
NAMES = ("a", "b")


def lora_dir(name: str) -> Path:
    return cache_dir() / "models" / f"lora-{name}"


def lora_tensors(seed: int) -> dict[str, np.ndarray]:
    s = SHAPES
    d, hd = s["dim"], s["dim"] // s["n_heads"]
    outs = {"q_proj": s["n_heads"] * hd, "v_proj": s["n_kv_heads"] * hd}
    rng = np.random.default_rng(seed)
    t = {}
    for i in range(s["n_layers"]):
        for proj, out in outs.items():
            p = f"base_model.model.model.layers.{i}.self_attn.{proj}."
            t[p + "lora_A.weight"] = (rng.standard_normal((RANK, d), dtype=np.float32) * 0.02).astype(np.float32)
            t[p + "lora_B.weight"] = (rng.standard_normal((out, RANK), dtype=np.float32) * 0.02).astype(np.float32)
    return t


def make_lora(name: str, force: bool = False) -> Path:
    out = lora_dir(name)
    stamp = out / ".recipe"
    if not force and stamp.exists() and stamp.read_text() == RECIPE:
        return out
    make_hf()
    out.mkdir(parents=True, exist_ok=True)
    cfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": str(hf_dir()),
           "r": RANK, "lora_alpha": 2 * RANK, "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
           "target_modules": ["q_proj", "v_proj"], "modules_to_save": None, "inference_mode": True,
           "use_rslora": False, "use_dora": False}
    (out / "adapter_config.json").write_text(json.dumps(cfg, indent=2))
    from safetensors.numpy import save_file
    save_file(lora_tensors(1000 + NAMES.index(name) if name in NAMES else 1000 + len(name)),
              str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
    stamp.write_text(RECIPE)
    return out


def make_all(force: bool = False) -> dict[str, Path]:
    return {n: make_lora(n, force) for n in NAMES}


if __name__ == "__main__":
    for n, p in make_all("--force" in sys.argv).items():
        print(n, p)
    sys.exit(0)
