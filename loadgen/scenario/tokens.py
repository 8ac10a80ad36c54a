"""Token counters: how prompt lengths are counted and how text of a given length is built.

    "words"            WordCounter       common English words, ~1 BPE token each (approximate)
    "bytes"            ByteCounter       1 token per ASCII byte: the JAX server's ByteTokenizer (exact)
    path/tokenizer.json TokenizerCounter  exact for that tokenizer
    each: count(text), build(rng, n) ─► text of n tokens, truncate(text, n), join(parts)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from loadgen.scenario.strict import ScenarioError

# Common English words; each is a single token with a leading space in GPT-2/Llama-style BPE.
WORDS = (
    "the of and to in is was he for it with as his on be at by had are but from or have an they "
    "which one you were all her she there would their we him been has when who will no more if out "
    "so said what up its about than into them can only other new some could time these two may "
    "then do first any my now such like our over man me even most made after also did many before "
    "must through back years where much your way well down should because each just those people "
    "how too little state good very make world still own see men work long get here between both "
    "life being under never day same another know while last might us great old year off come "
    "since against go came right used take three"
).split()


class WordCounter:
    label, exact = "words", False

    def count(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, n: int) -> str:
        """The first ``n`` tokens of ``text``."""
        return " ".join(text.split()[:n])

    def join(self, parts: list[str]) -> str:
        """Texts one after the other, counted as the sum of their counts."""
        return " ".join(p.strip() for p in parts if p.strip())

    def build(self, rng: np.random.Generator, n: int) -> str:
        return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=n))


class ByteCounter:
    label, exact = "bytes", True

    def count(self, text: str) -> int:
        return len(text.encode("utf-8"))

    def truncate(self, text: str, n: int) -> str:
        return text.encode("utf-8")[:n].decode("utf-8", "ignore")

    def join(self, parts: list[str]) -> str:
        return "".join(parts)

    def build(self, rng: np.random.Generator, n: int) -> str:
        text = WordCounter().build(rng, n // 2 + 2)
        while len(text) < n:
            text += " " + WordCounter().build(rng, n // 2 + 2)
        return text[:n]


MAX_TOKENIZER_BYTES = 1 << 30   # a tokenizer.json is read whole (real ones: a few to ~30 MB)


class TokenizerCounter:
    exact = True

    def __init__(self, path: str):
        from tokenizers import Tokenizer
        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.is_file():
            raise ScenarioError(f"workload.tokenizer: {path}: no such tokenizer.json")
        size = p.stat().st_size
        if size > MAX_TOKENIZER_BYTES:          # read whole by the library: refused unread
            raise ScenarioError(f"workload.tokenizer: {p}: {size:,} bytes, more than "
                                f"{MAX_TOKENIZER_BYTES:,} (docs/limits.md)")
        try:
            self.tok = Tokenizer.from_file(str(p))
        except Exception as e:  # the tokenizers library raises a plain Exception
            raise ScenarioError(f"workload.tokenizer: {p}: cannot load ({str(e).splitlines()[0]})") \
                from None
        self.label = str(p)

    def count(self, text: str) -> int:
        return len(self.tok.encode(text, add_special_tokens=False).ids)

    def truncate(self, text: str, n: int) -> str:
        return self.tok.decode(self.tok.encode(text, add_special_tokens=False).ids[:n])

    def join(self, parts: list[str]) -> str:
        """Joined at word boundaries; a merge across a boundary shows as a length error."""
        return " ".join(p.strip() for p in parts if p.strip())

    def build(self, rng: np.random.Generator, n: int) -> str:
        ids = self.tok.encode(WordCounter().build(rng, n + 8), add_special_tokens=False).ids
        while len(ids) < n:
            ids += self.tok.encode(" " + WordCounter().build(rng, n), add_special_tokens=False).ids
        # decode/re-encode can merge across the cut: trim until the round trip is exactly n
        take = n
        for _ in range(16):
            text = self.tok.decode(ids[:take])
            got = self.count(text)
            if got == n:
                return text
            take += n - got
            if take <= 0:
                break
        return self.tok.decode(ids[:n])


def make_counter(spec: str):
    if spec == "words":
        return WordCounter()
    if spec == "bytes":
        return ByteCounter()
    return TokenizerCounter(spec)
