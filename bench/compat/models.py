"""Random-weight models with the JAX ``small`` preset's shapes, made here (nothing from a model hub).

    synthetic corpus (seeded: loadgen's common words + made-up syllable words)
        ─► byte-level BPE, 32000 tokens incl. <s> </s> <unk> <|user|> <|assistant|> <|end|>
        ─► tokenizer.json / tokenizer_config.json (+ a chat template)   ┐
    seeded float32 weights (numpy, N(0, 0.02); norms = 1)               ├─► <cache>/models/small-hf/
        ─► config.json (LlamaForCausalLM) + model.safetensors           ┘     (vLLM: --load-format dummy
                                                                               reads only config + tokenizer;
                                                                               transformers serve loads weights)
        ─► the same tensors, q/k rows permuted to GGUF's rope layout, with the
           same BPE vocab and merges (tokenizer.ggml.model = gpt2)  ─► <cache>/models/small-f32.gguf

    small-hf's BPE + ``<image>`` (id 32000), BLIP-2 config: that Llama as the text model, a 2-layer
        vision tower (64x64 pixels, 16x16 patches) and Q-Former (16 queries: 16 image tokens per
        image), BlipImageProcessor + Blip2Processor files written by hand, no weights
        ─► <cache>/models/small-vl/   (vLLM --load-format dummy only)

Shapes (servers/jax/presets.py ``small``): 12 layers, dim 768, 12 heads / 4 KV heads (head 64),
ffn 2048, vocab 32000, untied head, rope theta 10000, eps 1e-5 — ~124.7M parameters, ~499 MB fp32.

The ``gguf`` writer comes from the gguf-py that the llama-cpp-python sdist vendors (unpacked by
install.py), else from an installed ``gguf`` package. Everything is idempotent: files already
there with the same recipe stamp are kept.

The embeddings runs use small-hf itself (vLLM ``--runner pooling --convert embed``).

Run: ``python -m bench.compat.models [--force] [--only hf|gguf|vision]`` (prints the paths).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from bench.compat.paths import cache_dir

RECIPE = "small-v1"   # change when the model recipe changes, so cached models are rebuilt
SEED = 0
SHAPES = dict(n_layers=12, dim=768, n_heads=12, n_kv_heads=4, ffn_dim=2048, vocab_size=32000,
              norm_eps=1e-5, rope_theta=10000.0, max_position=8192)
SPECIAL = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def hf_dir() -> Path:
    return cache_dir() / "models" / "small-hf"


def gguf_path() -> Path:
    return cache_dir() / "models" / "small-f32.gguf"


# --- tokenizer ---------------------------------------------------------------------------------

def _corpus(n_lines: int = 60000) -> list[str]:
    """Seeded synthetic text: loadgen's common English words (so its prompts are ~1 token per word)
    and made-up words from syllables (enough distinct words to fill 32000 BPE tokens)."""
    from loadgen.scenario.tokens import WORDS
    rng = random.Random(SEED)
    onsets = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl pr sh st th tr".split()
    vowels = "a e i o u ai ea ee oo ou".split()
    codas = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "ck"]
    made = sorted({"".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                           for _ in range(rng.randint(1, 3))) for _ in range(120000)})
    lines = []
    for _ in range(n_lines):
        ws = [rng.choice(WORDS) if rng.random() < 0.5 else rng.choice(made)
              for _ in range(rng.randint(8, 24))]
        if rng.random() < 0.3:
            ws[0] = ws[0].capitalize()
        lines.append(" ".join(ws) + rng.choice([".", ",", "?", "!", ""]))
    return lines


def build_tokenizer(out: Path) -> dict:
    """Train the byte-level BPE; write tokenizer.json, tokenizer_config.json, special_tokens_map.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=SHAPES["vocab_size"], special_tokens=SPECIAL, min_frequency=1,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    n = tok.get_vocab_size()
    if n != SHAPES["vocab_size"]:
        raise RuntimeError(f"BPE training gave {n} tokens, not {SHAPES['vocab_size']}")
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    added = {str(tok.token_to_id(s)): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                       "single_word": False, "special": True} for s in SPECIAL}
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
           "unk_token": "<unk>", "pad_token": "</s>", "add_bos_token": False, "add_eos_token": False,
           "clean_up_tokenization_spaces": False, "model_max_length": SHAPES["max_position"],
           "chat_template": CHAT_TEMPLATE, "added_tokens_decoder": added}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>"}, indent=2))
    return {"vocab_size": n, "bos": tok.token_to_id("<s>"), "eos": tok.token_to_id("</s>")}


# --- weights -----------------------------------------------------------------------------------

def hf_tensors() -> dict[str, np.ndarray]:
    """Seeded float32 weights under Hugging Face Llama names, shapes (out, in)."""
    s = SHAPES
    d, hd = s["dim"], s["dim"] // s["n_heads"]
    q, kv, f, v = s["n_heads"] * hd, s["n_kv_heads"] * hd, s["ffn_dim"], s["vocab_size"]
    rng = np.random.default_rng(SEED)

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    t = {"model.embed_tokens.weight": w(v, d)}
    for i in range(s["n_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(d, np.float32)
        t[p + "self_attn.q_proj.weight"] = w(q, d)
        t[p + "self_attn.k_proj.weight"] = w(kv, d)
        t[p + "self_attn.v_proj.weight"] = w(kv, d)
        t[p + "self_attn.o_proj.weight"] = w(d, q)
        t[p + "post_attention_layernorm.weight"] = np.ones(d, np.float32)
        t[p + "mlp.gate_proj.weight"] = w(f, d)
        t[p + "mlp.up_proj.weight"] = w(f, d)
        t[p + "mlp.down_proj.weight"] = w(d, f)
    t["model.norm.weight"] = np.ones(d, np.float32)
    t["lm_head.weight"] = w(v, d)
    return t


def hf_config(tok: dict) -> dict:
    s = SHAPES
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": s["dim"],
            "intermediate_size": s["ffn_dim"], "num_hidden_layers": s["n_layers"],
            "num_attention_heads": s["n_heads"], "num_key_value_heads": s["n_kv_heads"],
            "head_dim": s["dim"] // s["n_heads"], "vocab_size": s["vocab_size"],
            "max_position_embeddings": s["max_position"], "rms_norm_eps": s["norm_eps"],
            "rope_theta": s["rope_theta"], "hidden_act": "silu", "tie_word_embeddings": False,
            "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
            "bos_token_id": tok["bos"], "eos_token_id": tok["eos"], "pad_token_id": tok["eos"],
            "initializer_range": 0.02, "loadgen_compat_recipe": RECIPE}


def make_hf(force: bool = False) -> Path:
    out = hf_dir()
    stamp = out / ".recipe"
    if not force and stamp.exists() and stamp.read_text() == RECIPE:
        return out
    t0 = time.time()
    tok = build_tokenizer(out)
    (out / "config.json").write_text(json.dumps(hf_config(tok), indent=2))
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": tok["bos"], "eos_token_id": tok["eos"], "do_sample": False}, indent=2))
    from safetensors.numpy import save_file
    save_file(hf_tensors(), str(out / "model.safetensors"), metadata={"format": "pt"})
    stamp.write_text(RECIPE)
    print(f"hf model: {out} ({time.time() - t0:.0f} s)", file=sys.stderr)
    return out


# --- GGUF --------------------------------------------------------------------------------------

def _import_gguf():
    """llama.cpp's own ``gguf`` package: the copy vendored in the llama-cpp-python sdist that
    ``bench.compat.install`` unpacked (it matches the llama-server built from it), loaded from its
    directory as the top-level package ``gguf`` without adding that tree to sys.path; else an installed one."""
    if "gguf" in sys.modules:
        return sys.modules["gguf"]
    vend = sorted((cache_dir() / "llama.cpp").glob("llama_cpp_python-*/vendor/llama.cpp/gguf-py/gguf"))
    if not vend:
        import gguf
        return gguf
    spec = importlib.util.spec_from_file_location("gguf", vend[-1] / "__init__.py",
                                                  submodule_search_locations=[str(vend[-1])])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gguf"] = mod                       # its own `from .constants import *` resolve here
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop("gguf", None)
        raise
    return mod


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate-half rows → GGUF interleaved rows (llama.cpp's convert_hf_to_gguf LlamaModel.permute)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def make_gguf(force: bool = False) -> Path:
    out = gguf_path()
    stamp = out.with_suffix(".recipe")
    if not force and out.exists() and stamp.exists() and stamp.read_text() == RECIPE:
        return out
    src = make_hf(force)
    gguf = _import_gguf()
    t0 = time.time()
    s = SHAPES
    tj = json.loads((src / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    tokens = [None] * len(vocab)
    for piece, i in vocab.items():
        tokens[i] = piece
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    special = set(SPECIAL)
    types = [gguf.TokenType.CONTROL if p in special else gguf.TokenType.NORMAL for p in tokens]
    w = gguf.GGUFWriter(str(out) + ".tmp", "llama")
    w.add_name("loadgen-compat-small-random")
    w.add_context_length(s["max_position"])
    w.add_embedding_length(s["dim"])
    w.add_block_count(s["n_layers"])
    w.add_feed_forward_length(s["ffn_dim"])
    w.add_head_count(s["n_heads"])
    w.add_head_count_kv(s["n_kv_heads"])
    w.add_rope_dimension_count(s["dim"] // s["n_heads"])
    w.add_rope_freq_base(s["rope_theta"])
    w.add_layer_norm_rms_eps(s["norm_eps"])
    w.add_vocab_size(s["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<s>"))
    w.add_eos_token_id(tokens.index("</s>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
                 "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
                 "self_attn.o_proj.weight": "attn_output.weight",
                 "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                 "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    for name, arr in hf_tensors().items():
        if name in names:
            gname = names[name]
        else:
            i, rest = name[len("model.layers."):].split(".", 1)
            gname = f"blk.{i}.{per_layer[rest]}"
        if rest_is(name, "q_proj"):
            arr = _permute(arr, s["n_heads"])
        elif rest_is(name, "k_proj"):
            arr = _permute(arr, s["n_kv_heads"])
        w.add_tensor(gname, np.ascontiguousarray(arr))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    Path(str(out) + ".tmp").rename(out)
    stamp.write_text(RECIPE)
    print(f"gguf model: {out} ({time.time() - t0:.0f} s)", file=sys.stderr)
    return out


def rest_is(name: str, proj: str) -> bool:
    return name.endswith(f"self_attn.{proj}.weight")


# --- vision-language (BLIP-2 shapes, dummy weights) ---------------------------------------------
# BLIP-2, not LLaVA or PaliGemma: in vLLM 0.32 those reach vision.get_vision_encoder_info, which
# imports pixtral.py → transformers' torchvision image processor, and the torchvision wheel the
# registry offers is a CUDA build that dies on torch 2.13.0+cpu (install.py trap 1; with its
# libraries removed it still dies registering torchvision::nms). blip2.py needs no torchvision.

VISION_RECIPE = "small-vl-blip2-v2"
IMAGE_TOKEN = "<image>"
QUERY_TOKENS = 16               # image tokens per image: BLIP-2's Q-Former queries
# a tiny BLIP vision tower (64x64 pixels, 16x16 patches) and a 2-layer Q-Former
VISION = dict(image_size=64, patch_size=16, hidden_size=128, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=2)
CLIP_MEAN, CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]


def vision_dir() -> Path:
    return cache_dir() / "models" / "small-vl"


def image_tokens() -> int:
    """Image tokens per image in the vision model's prompt."""
    return QUERY_TOKENS


def vision_config(vocab: int, image_id: int, bos: int, eos: int) -> dict:
    text = {k: v for k, v in hf_config({"bos": bos, "eos": eos}).items() if k != "loadgen_compat_recipe"}
    text["vocab_size"] = vocab
    vis = {"model_type": "blip_2_vision_model", "hidden_act": "gelu", "layer_norm_eps": 1e-6,
           "attention_dropout": 0.0, "qkv_bias": True, **VISION}
    qf = {"model_type": "blip_2_qformer", "hidden_size": VISION["hidden_size"], "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": VISION["intermediate_size"],
          "encoder_hidden_size": VISION["hidden_size"], "cross_attention_frequency": 1, "vocab_size": 30522,
          "max_position_embeddings": 512, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
          "position_embedding_type": "absolute"}
    return {"architectures": ["Blip2ForConditionalGeneration"], "model_type": "blip-2",
            "vision_config": vis, "qformer_config": qf, "text_config": text, "num_query_tokens": QUERY_TOKENS,
            "image_token_index": image_id, "image_token_id": image_id, "use_decoder_only_language_model": True,
            "torch_dtype": "float32", "loadgen_compat_recipe": VISION_RECIPE}


def make_vision(force: bool = False) -> Path:
    """A BLIP-2 model dir with no weights (vLLM --load-format dummy): small-hf's Llama as the text
    model and its BPE plus ``<image>``, a 2-layer vision tower and Q-Former, and the processor files
    written by hand."""
    out = vision_dir()
    stamp = out / ".recipe"
    if not force and stamp.exists() and stamp.read_text() == VISION_RECIPE:
        return out
    src = make_hf(force)
    from tokenizers import AddedToken, Tokenizer
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(IMAGE_TOKEN, special=True, normalized=False)])
    image_id, vocab = tok.token_to_id(IMAGE_TOKEN), tok.get_vocab_size()
    if out.exists():
        for f in out.iterdir():          # an older recipe's files (e.g. chat_template.jinja) go
            f.unlink()
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    cfg = json.loads((src / "tokenizer_config.json").read_text())
    cfg["added_tokens_decoder"][str(image_id)] = {"content": IMAGE_TOKEN, "lstrip": False, "normalized": False,
                                                  "rstrip": False, "single_word": False, "special": True}
    cfg["processor_class"] = "Blip2Processor"     # no tokenizer.image_token: Blip2Processor wants its own AddedToken
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
    (out / "special_tokens_map.json").write_text((src / "special_tokens_map.json").read_text())
    hc = json.loads((src / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(
        vision_config(vocab, image_id, hc["bos_token_id"], hc["eos_token_id"]), indent=2))
    (out / "generation_config.json").write_text((src / "generation_config.json").read_text())
    n = VISION["image_size"]
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "BlipImageProcessor", "processor_class": "Blip2Processor",
        "do_resize": True, "size": {"height": n, "width": n}, "resample": 3, "do_rescale": True,
        "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": CLIP_MEAN, "image_std": CLIP_STD,
        "do_convert_rgb": True}, indent=2))
    (out / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Blip2Processor", "num_query_tokens": QUERY_TOKENS}, indent=2))
    stamp.write_text(VISION_RECIPE)
    print(f"vision model: {out}", file=sys.stderr)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="make the random-weight compat models in the cache")
    ap.add_argument("--force", action="store_true", help="rebuild even if the recipe stamp matches")
    ap.add_argument("--only", choices=["hf", "gguf", "vision"], default=None)
    a = ap.parse_args(argv)
    if a.only in (None, "hf"):
        print(make_hf(a.force))
    if a.only in (None, "gguf"):
        print(make_gguf(a.force))
    if a.only in (None, "vision"):
        print(make_vision(a.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
