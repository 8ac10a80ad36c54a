"""ByteTokenizer (synthetic presets) and HFTokenizer (a tokenizer.json made here with `tokenizers`)."""
from __future__ import annotations

import json

import pytest

from servers.jax.tokenizer import ByteTokenizer, HFTokenizer, simple_chat_template


def test_byte_tokenizer_roundtrip_and_specials():
    t = ByteTokenizer(512)
    text = "Hello, world!\n\tok"
    ids = t.encode(text)
    assert ids == [ord(c) for c in text] and t.decode(ids) == text
    assert (t.bos_id, t.eos_id, t.vocab_size) == (256, 257, 512)
    with pytest.raises(ValueError, match="vocab_size"):
        ByteTokenizer(100)


def test_byte_tokenizer_every_id_decodes_to_printable_text():
    t = ByteTokenizer(32000)
    for i in list(range(600)) + [31999]:
        s = t.decode([i])
        assert len(s) >= 1 and all(c.isprintable() or c in "\n\t" for c in s), i
    assert t.decode([300]) == t.decode([300])          # deterministic stand-in
    assert t.decode([0, 1]) != ""


def test_simple_chat_template():
    msgs = [{"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert simple_chat_template(msgs) == "system: be brief\nuser: hi\nassistant: "
    assert ByteTokenizer().apply_chat_template(msgs) == simple_chat_template(msgs)


def _tokenizer_dir(tmp_path, template: str | None):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, "<bos>": 1, "<eos>": 2, "hi": 3, "there": 4, "user": 5, ":": 6}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    cfg = {"bos_token": {"content": "<bos>"}, "eos_token": "<eos>"}
    if template:
        cfg["chat_template"] = template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_hf_tokenizer_with_jinja_template(tmp_path):
    t = HFTokenizer(_tokenizer_dir(tmp_path, "{{ bos_token }}{% for m in messages %}{{ m['content'] }} "
                                              "{% endfor %}{% if add_generation_prompt %}there{% endif %}"))
    assert (t.bos_id, t.eos_id, t.vocab_size) == (1, 2, 7)
    assert t.encode("hi there") == [3, 4] and t.decode([3, 4]) == "hi there"
    assert t.encode("nope") == [0]
    assert t.apply_chat_template([{"role": "user", "content": "hi"}]) == "<bos>hi there"
    assert t.describe()["chat_template"].startswith("jinja2")


def test_hf_tokenizer_without_template_uses_simple(tmp_path):
    t = HFTokenizer(_tokenizer_dir(tmp_path, None))
    msgs = [{"role": "user", "content": "hi"}]
    assert t.apply_chat_template(msgs) == "user: hi\nassistant: "
    assert t.describe()["chat_template"] == "simple"


def test_hf_tokenizer_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        HFTokenizer(tmp_path)
