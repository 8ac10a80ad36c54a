"""servers.jax: the built-in JAX inference server (continuous batching, KV cache, OpenAI API).

Data flow (JetStream style; each box is one module)::

    HTTP client ──► api.py (aiohttp, OpenAI JSON/SSE) ──tokenizer.encode──► GenRequest (requests.py)
                         ▲                                                   │ submit / cancel
                         │ on_token(tok, finish) via loop.call_soon_threadsafe ▼
                         │                        orchestrator.py  (engine thread, waiting queue)
                         │                           │ admit into free slots     │ every step
                         │                           ▼                           ▼
                         └──── tokens ◄──── engine.py: prefill(ids) → Prefix → insert(prefix, slot)
                                                      generate() → [slots] tokens; free(slot)
                                                           │ jitted, KV cache donated
                                                           ▼
                                        model.py (Llama/Qwen2 decoder) + sampling.py
                                           ▲ params: presets.py (seeded random)
                                           │      or weights.py (local HF dir, safetensors)

POST /v1/embeddings: api.py ─► embeddings.py (input forms → token ids, EmbedPlan) ─► orchestrator
.submit_embed ─► engine.embed_step (embed_forward.py: one input per loop iteration, a prefill-only
forward, mean of the final hidden states, L2-normalised) ─► on_done(vectors) ─► float list | base64
JSON.

--prefix-cache on: engine.start_prefill(ids, home=slot) ─► prefix_cache.PrefixCache.match (block hash
chain, LRU) ─► prefix_store.PrefixStore copies the cached K/V blocks into the slot ─► the rest of the
prompt as fused pieces from there; engine.insert stores the prompt's new full blocks. Answers carry
usage.prompt_tokens_details.cached_tokens (GenRequest.cached_tokens); /metrics the
vllm:prefix_cache_{queries,hits} counters (tokens); POST /reset_prefix_cache forgets every block.

POST /v1/responses: api.py ─► responses.py (input/instructions → chat messages ─► protocol.build_plan)
─► the same Generation as chat ─► named events (response.created … output_text.delta per token …
response.completed | incomplete | failed) or one ``object: "response"`` body.

``build(source, dtype, slots, max_model_len, seed)`` puts the pieces together and returns
``(engine, tokenizer, describe_dict)``; ``describe_dict`` is what GET /info serves.

May import: jax, numpy, tokenizers, safetensors, aiohttp, prometheus_client, pydantic and the
standard library; never loadgen or analysis (tests/test_layering.py).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

__all__ = ["build", "default_dtype", "compile_cache_dir"]


def default_dtype() -> str:
    """fp32 on CPU (bf16 through XLA:CPU measured slower here; see engine.py), bf16 on GPU/TPU."""
    import jax

    return "fp32" if jax.default_backend() == "cpu" else "bf16"


def compile_cache_dir() -> Optional[str]:
    """JAX's persistent compilation cache: $SERVERS_JAX_CACHE_DIR ("" or "off" disables it), else JAX's
    own $JAX_COMPILATION_CACHE_DIR when set (never overridden), else ~/.cache/loadgen/jax-compile.
    A warm cache cut the tiny preset's warm-up here from 14.6 s to 2.6 s (measured), which matters for
    tests and restarts; compiled programs are keyed by JAX version, flags and device, so a stale entry
    is never used. The test suite points both variables at a directory of its own (tests/conftest.py)."""
    env = os.environ.get("SERVERS_JAX_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else env
    jax_env = os.environ.get("JAX_COMPILATION_CACHE_DIR", "").strip()
    if jax_env:
        return jax_env
    return str(Path.home() / ".cache" / "loadgen" / "jax-compile")


def _enable_compile_cache() -> Optional[str]:
    import jax

    d = compile_cache_dir()
    if d is None:
        return None
    try:
        Path(d).mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", d)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except (OSError, AttributeError):    # read-only home or an older JAX: just compile every time
        return None
    return d


def build(source: Optional[str] = None, dtype: Optional[str] = None, slots: int = 8,
          max_model_len: int = 1024, seed: int = 0, *, preset: Optional[str] = None,
          model_dir: Optional[str] = None, warmup: bool = True, **engine_kw):
    """source: a preset name (see presets.PRESETS) or a local Hugging Face model directory.

    Returns (engine, tokenizer, describe_dict). With ``warmup`` every program is compiled before
    returning (describe_dict["compile_s"]). Bad input raises ValueError with a one-line message.
    """
    cache_dir = _enable_compile_cache()     # before any JAX op, so every program can use it
    import jax

    from . import model as M
    from .engine import Engine
    from .presets import PRESETS, get_preset, shape_dict
    from .tokenizer import ByteTokenizer, HFTokenizer
    from .weights import ModelDirError, eos_ids_from_config, load_model_dir

    if preset is not None and model_dir is not None:
        raise ValueError("give either preset or model_dir, not both")
    source = source or preset or model_dir
    if source is None:
        raise ValueError("build() needs a preset name or a model directory")
    dtype = dtype or default_dtype()
    if dtype not in M.DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(M.DTYPES)}, got {dtype!r}")
    if int(slots) < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    t0 = time.perf_counter()
    if model_dir is None and source in PRESETS:
        args = get_preset(source)
        params = M.init_params(args, dtype, seed)
        tok = ByteTokenizer(args.vocab_size)
        eos = {tok.eos_id}
        weights = f"synthetic: seeded random normal(0, 0.02), seed {seed}"
    elif model_dir is not None or Path(source).exists() or "/" in source:
        args, params, cfg = load_model_dir(source, dtype)
        try:
            tok = HFTokenizer(source)
        except FileNotFoundError as e:
            raise ModelDirError(str(e)) from None
        eos = eos_ids_from_config(cfg) | ({tok.eos_id} if tok.eos_id is not None else set())
        weights = f"huggingface dir {Path(source).resolve()}"
    else:
        raise ValueError(f"{source!r} is neither a preset ({', '.join(PRESETS)}) nor a directory")
    if max_model_len > args.max_position:
        raise ValueError(f"max_model_len {max_model_len} exceeds the model's "
                         f"max_position_embeddings {args.max_position}")
    engine = Engine(args, params, dtype=dtype, slots=slots, max_model_len=max_model_len,
                    eos_ids=eos, **engine_kw)
    load_s = time.perf_counter() - t0
    if warmup:
        engine.warmup()
    dev = jax.devices()[0]
    info = {
        "preset": args.name, "source": str(source), "weights": weights,
        "n_params": args.n_params(), "dtype": dtype, "slots": engine.slots,
        "max_model_len": engine.max_model_len, "kv_cache_bytes": engine.kv_cache_bytes(),
        "kv_cache_layout": "per layer k [slots, n_kv_heads, head_dim, max_model_len], "
                           "v [slots, n_kv_heads, max_model_len, head_dim]",
        "weight_bytes": args.n_params() * (4 if dtype == "fp32" else 2),
        "jax_version": jax.__version__, "backend": jax.default_backend(),
        "device_kind": dev.device_kind, "device_count": jax.device_count(),
        "load_s": round(load_s, 3), "compile_cache_dir": cache_dir,
        "compile_s": None if engine.compile_s is None else round(engine.compile_s, 3),
        "prefill_buckets": engine.prefill_buckets, "attn_buckets": engine.attn_buckets,
        "batch_buckets": engine.batch_buckets, "prefill_chunk": engine.prefill_chunk,
        "interleave_chunk": engine.interleave_chunk,
        "prefix_cache": None if engine.prefix is None else engine.prefix.describe(),
        "eos_ids": sorted(eos), "tokenizer": tok.describe(),
        "model": shape_dict(args, dtype, engine.max_model_len, engine.slots),
    }
    return engine, tok, info
