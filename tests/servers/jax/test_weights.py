"""Loading a local Hugging Face-format directory: a tiny random one written here under tmp_path
(config.json + model.safetensors + tokenizer.json) must give the same logits as the same weights
in our own layout; broken directories give one-line ModelDirError messages."""
from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from safetensors.numpy import save_file

from servers.jax import build
from servers.jax import model as M
from servers.jax.presets import ModelArgs
from servers.jax.weights import ModelDirError, load_model_dir

WORDS = ["hello", "world", "the", "cat", "sat", "on", "mat", "a", "dog"]


def to_hf(params: M.Params, a: ModelArgs) -> dict[str, np.ndarray]:
    """Our pytree → HF names, torch Linear layout [out, in] (the inverse of weights.py)."""
    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": np.asarray(params["embed"]),
                                "model.norm.weight": np.asarray(params["norm"])}
    if not a.tied_embeddings:
        t["lm_head.weight"] = np.asarray(params["lm_head"]).T.copy()
    q, k = a.q_dim, a.kv_dim
    for i, lp in enumerate(params["layers"]):
        p = f"model.layers.{i}."
        w = np.asarray(lp["wqkv"])
        for name, sl in (("q", slice(0, q)), ("k", slice(q, q + k)), ("v", slice(q + k, q + 2 * k))):
            t[p + f"self_attn.{name}_proj.weight"] = w[:, sl].T.copy()
            if "bqkv" in lp:
                t[p + f"self_attn.{name}_proj.bias"] = np.asarray(lp["bqkv"])[sl].copy()
        t[p + "self_attn.o_proj.weight"] = np.asarray(lp["wo"]).T.copy()
        w13 = np.asarray(lp["w13"])
        t[p + "mlp.gate_proj.weight"] = w13[:, :a.ffn_dim].T.copy()
        t[p + "mlp.up_proj.weight"] = w13[:, a.ffn_dim:].T.copy()
        t[p + "mlp.down_proj.weight"] = np.asarray(lp["w2"]).T.copy()
        t[p + "input_layernorm.weight"] = np.asarray(lp["attn_norm"])
        t[p + "post_attention_layernorm.weight"] = np.asarray(lp["ffn_norm"])
    return t


def write_tokenizer(d: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>",
        "chat_template": "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}"
                         "{% if add_generation_prompt %}the{% endif %}"}))


def write_hf_dir(d: Path, a: ModelArgs, params: M.Params, arch: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": [arch], "model_type": "qwen2" if arch.startswith("Qwen2") else "llama",
           "hidden_size": a.dim, "num_hidden_layers": a.n_layers, "num_attention_heads": a.n_heads,
           "num_key_value_heads": a.n_kv_heads, "intermediate_size": a.ffn_dim,
           "vocab_size": a.vocab_size, "rms_norm_eps": a.norm_eps, "rope_theta": a.rope_theta,
           "tie_word_embeddings": a.tied_embeddings, "max_position_embeddings": 256,
           "eos_token_id": 2, "bos_token_id": 1, "torch_dtype": "float32"}
    if a.rope_scaling:
        cfg["rope_scaling"] = a.rope_scaling
    (d / "config.json").write_text(json.dumps(cfg))
    save_file(to_hf(params, a), str(d / "model.safetensors"))
    write_tokenizer(d)
    return d


LLAMA = ModelArgs("hf-llama", dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96, vocab_size=48,
                  rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0,
                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 64})
QWEN = ModelArgs("hf-qwen", dim=64, n_layers=2, n_heads=4, n_kv_heads=1, ffn_dim=96, vocab_size=48,
                 norm_eps=1e-6, rope_theta=1e6, tied_embeddings=True, qkv_bias=True)


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("a,arch", [(LLAMA, "LlamaForCausalLM"), (QWEN, "Qwen2ForCausalLM")])
def test_hf_dir_logits_match_preset_structured_model(tmp_path, a, arch):
    params = M.init_params(a, "fp32", seed=5, std=0.2)
    d = write_hf_dir(tmp_path / "m", a, params, arch)
    args2, params2, _ = load_model_dir(d, "fp32")
    assert (args2.qkv_bias, args2.tied_embeddings, args2.n_kv_heads) == (a.qkv_bias, a.tied_embeddings, a.n_kv_heads)
    assert ("lm_head" in params2) == (not a.tied_embeddings)
    toks = np.array([1, 5, 7, 3, 40, 12, 9], np.int32)
    ref_fn = jax.jit(lambda p, t: M.forward_reference(p, a, t))
    ref = ref_fn(params, toks)
    got = jax.jit(lambda p, t: M.forward_reference(p, args2, t))(params2, toks)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-5, atol=1e-5)

    engine, tok, info = build(model_dir=str(d), slots=2, max_model_len=32, warmup=False)
    assert info["model"]["n_params"] == a.n_params() and info["tokenizer"]["kind"] == "huggingface"
    assert info["eos_ids"] == [2] and tok.eos_id == 2 and tok.bos_id == 1
    ids = tok.encode("hello the cat")
    assert ids == [3, 5, 6] and tok.decode(ids) == "hello the cat"
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}]) == "user hi the"
    if a.qkv_bias:                         # one engine compile is enough for the file
        pre = engine.prefill(ids, None)
        assert pre.first_token == int(np.argmax(np.asarray(ref_fn(params, np.array(ids, np.int32)))[-1]))


def test_missing_and_unsupported_dirs_raise_clear_errors(tmp_path):
    with pytest.raises(ModelDirError, match="does not exist"):
        load_model_dir(tmp_path / "nope", "fp32")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelDirError, match="config.json not found"):
        load_model_dir(tmp_path / "empty", "fp32")
    gpt = tmp_path / "gpt2"
    gpt.mkdir()
    (gpt / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
    with pytest.raises(ModelDirError, match="unsupported architecture.*GPT2LMHeadModel"):
        load_model_dir(gpt, "fp32")
    with pytest.raises(ValueError, match="neither a preset"):
        build("no-such-preset", warmup=False)


def test_incomplete_dirs_raise_clear_errors(tmp_path):
    params = M.init_params(QWEN, "fp32", seed=1)
    d = write_hf_dir(tmp_path / "m", QWEN, params, "Qwen2ForCausalLM")
    (d / "tokenizer.json").unlink()
    with pytest.raises(ModelDirError, match="tokenizer.json"):
        build(model_dir=str(d), warmup=False)
    tensors = to_hf(params, QWEN)
    del tensors["model.layers.1.mlp.down_proj.weight"]
    save_file(tensors, str(d / "model.safetensors"))
    with pytest.raises(ModelDirError, match="model.layers.1.mlp.down_proj.weight"):
        load_model_dir(d, "fp32")
    (d / "model.safetensors").unlink()
    with pytest.raises(ModelDirError, match="no \\*.safetensors"):
        load_model_dir(d, "fp32")
    cfg = json.loads((d / "config.json").read_text())
    del cfg["hidden_size"]
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelDirError, match="hidden_size"):
        load_model_dir(d, "fp32")
