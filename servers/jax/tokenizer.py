"""Tokenizers: a synthetic ``ByteTokenizer`` and ``HFTokenizer`` (a local tokenizer.json).

Both expose: ``encode(str) -> list[int]``, ``decode(list[int]) -> str``, ``eos_id``, ``bos_id``,
``vocab_size``, ``apply_chat_template(messages) -> str`` and ``describe() -> dict``.

ByteTokenizer: ids 0..255 are bytes (one token per ASCII character), then BOS and EOS. Any id that
is not a printable ASCII byte decodes to a deterministic printable stand-in (``chr(33 + id % 94)``)
so every generated token of a random-weight model yields at least one visible character.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

_PRINTABLE = set(range(32, 127)) | {9, 10}


def simple_chat_template(messages: list[dict]) -> str:
    """A plain template: "<role>: <content>\\n" per message, then "assistant: "."""
    parts = []
    for m in messages:
        content = m.get("content", "")
        if isinstance(content, list):       # OpenAI content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"{m.get('role', 'user')}: {content}\n")
    return "".join(parts) + "assistant: "


class ByteTokenizer:
    BYTES = 256

    def __init__(self, vocab_size: int = 258) -> None:
        if vocab_size < self.BYTES + 2:
            raise ValueError(f"ByteTokenizer needs vocab_size >= {self.BYTES + 2}, got {vocab_size}")
        self.vocab_size = int(vocab_size)
        self.bos_id: Optional[int] = self.BYTES
        self.eos_id: Optional[int] = self.BYTES + 1

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def token_text(self, i: int) -> str:
        i = int(i)
        if i in _PRINTABLE:
            return chr(i)
        return chr(33 + i % 94)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.token_text(i) for i in ids)

    def apply_chat_template(self, messages: list[dict]) -> str:
        return simple_chat_template(messages)

    def describe(self) -> dict:
        return {"kind": "byte", "vocab_size": self.vocab_size, "bos_id": self.bos_id,
                "eos_id": self.eos_id, "chat_template": "simple"}


class HFTokenizer:
    """tokenizer.json through the ``tokenizers`` library; chat template from tokenizer_config.json
    rendered with jinja2 when it is installed, else the simple template (said in describe())."""

    def __init__(self, model_dir: str | Path, eos_id: Optional[int] = None,
                 bos_id: Optional[int] = None) -> None:
        from tokenizers import Tokenizer

        d = Path(model_dir)
        path = d / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (the model directory needs a tokenizer.json)")
        self._tok = Tokenizer.from_file(str(path))
        self.vocab_size = int(self._tok.get_vocab_size(with_added_tokens=True))
        cfg = {}
        if (d / "tokenizer_config.json").is_file():
            cfg = json.loads((d / "tokenizer_config.json").read_text())
        self.eos_id = eos_id if eos_id is not None else self._special_id(cfg.get("eos_token"))
        self.bos_id = bos_id if bos_id is not None else self._special_id(cfg.get("bos_token"))
        self._bos_text = self._special_text(cfg.get("bos_token"))
        self._eos_text = self._special_text(cfg.get("eos_token"))
        self._template_src = cfg.get("chat_template") if isinstance(cfg.get("chat_template"), str) else None
        self._template = None
        self.chat_template_kind = "simple"
        if self._template_src:
            try:
                import jinja2
                from jinja2.sandbox import ImmutableSandboxedEnvironment

                env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
                env.globals["raise_exception"] = _raise
                self._template = env.from_string(self._template_src)
                self.chat_template_kind = f"jinja2 {jinja2.__version__} (tokenizer_config.json)"
            except ImportError:
                self.chat_template_kind = "simple (tokenizer_config.json has a Jinja chat_template " \
                                          "but jinja2 is not installed)"

    @staticmethod
    def _special_text(tok) -> Optional[str]:
        if isinstance(tok, dict):
            return tok.get("content")
        return tok if isinstance(tok, str) else None

    def _special_id(self, tok) -> Optional[int]:
        text = self._special_text(tok)
        return None if text is None else self._tok.token_to_id(text)

    def encode(self, text: str) -> list[int]:
        # a rendered chat template already holds its special tokens as text
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)

    def apply_chat_template(self, messages: list[dict]) -> str:
        if self._template is None:
            return simple_chat_template(messages)
        return self._template.render(messages=messages, add_generation_prompt=True,
                                     bos_token=self._bos_text or "", eos_token=self._eos_text or "")

    def describe(self) -> dict:
        return {"kind": "huggingface", "vocab_size": self.vocab_size, "bos_id": self.bos_id,
                "eos_id": self.eos_id, "chat_template": self.chat_template_kind}


def _raise(msg: str):
    raise ValueError(msg)
