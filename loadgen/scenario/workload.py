"""Workload: what each request asks for — (prompt, prompt_tokens, max_tokens), seeded.

    scenario.Workload ─► counter (words | bytes | tokenizer.json) ─► source:
        synthetic  lengths drawn from Dist (fixed / uniform / normal / lognormal, clipped)
        jsonl      {"prompt": str, "max_tokens": int?} per line, in file order
        sharegpt   [{"conversations": [{"from": "human"|"gpt", "value": str}, ...]}, ...]:
                   first human turn = prompt; the gpt reply after it sets max_tokens
    ─► optional shared prefix in front of every prompt ─► PromptSpec stream (cycles files)

Token counts are exact for "bytes" (1 token per ASCII byte, the JAX server's ByteTokenizer) and
for a tokenizer.json; "words" counts whitespace-separated common English words (about one BPE
token each), labelled ``approximate``.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from loadgen.scenario.model import Dist, ScenarioError, Workload

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


@dataclass(frozen=True)
class PromptSpec:
    prompt: str
    prompt_tokens: int          # by the workload's counter (see WorkloadPlan.token_count)
    max_tokens: int


# --- token counters / builders -------------------------------------------------------------

class WordCounter:
    label, exact = "words", False

    def count(self, text: str) -> int:
        return len(text.split())

    def build(self, rng: np.random.Generator, n: int) -> str:
        return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=n))


class ByteCounter:
    label, exact = "bytes", True

    def count(self, text: str) -> int:
        return len(text.encode("utf-8"))

    def build(self, rng: np.random.Generator, n: int) -> str:
        text = WordCounter().build(rng, n // 2 + 2)
        while len(text) < n:
            text += " " + WordCounter().build(rng, n // 2 + 2)
        return text[:n]


class TokenizerCounter:
    exact = True

    def __init__(self, path: str):
        from tokenizers import Tokenizer
        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.is_file():
            raise ScenarioError(f"workload.tokenizer: {path}: no such tokenizer.json")
        try:
            self.tok = Tokenizer.from_file(str(p))
        except Exception as e:  # the tokenizers library raises a plain Exception
            raise ScenarioError(f"workload.tokenizer: {p}: cannot load ({str(e).splitlines()[0]})") \
                from None
        self.label = str(p)

    def count(self, text: str) -> int:
        return len(self.tok.encode(text, add_special_tokens=False).ids)

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


# --- lengths --------------------------------------------------------------------------------

def sample_lengths(d: Dist, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` integer lengths from ``d``, clipped to [d.min, d.max]. shape: (n,) int64."""
    hi = d.max if d.max is not None else np.iinfo(np.int32).max
    if d.dist == "fixed":
        x = np.full(n, float(d.value))
    elif d.dist == "uniform":
        x = rng.integers(d.min, d.max + 1, size=n).astype(float)
    elif d.dist == "normal":
        x = rng.normal(d.mean, d.std, size=n)
    else:  # lognormal parametrised by the mean and std of the lengths themselves
        sigma2 = np.log1p((d.std / d.mean) ** 2)
        x = rng.lognormal(np.log(d.mean) - sigma2 / 2, np.sqrt(sigma2), size=n)
    return np.clip(np.rint(x), d.min, hi).astype(np.int64)


# --- file sources ---------------------------------------------------------------------------

def _read_jsonl(path: Path) -> list[tuple[str, Optional[int]]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ScenarioError(f"workload.path: {path} line {no}: not valid JSON ({e.msg})") \
                    from None
            if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
                raise ScenarioError(f"workload.path: {path} line {no}: needs a string 'prompt'")
            mt = row.get("max_tokens")
            if mt is not None and (not isinstance(mt, int) or isinstance(mt, bool) or mt <= 0):
                raise ScenarioError(f"workload.path: {path} line {no}: 'max_tokens' must be a "
                                    "positive integer")
            out.append((row["prompt"], mt))
    return out


def _read_sharegpt(path: Path, counter) -> list[tuple[str, Optional[int]]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ScenarioError(f"workload.path: {path}: not valid JSON (line {e.lineno}: {e.msg})") \
            from None
    if not isinstance(data, list):
        raise ScenarioError(f"workload.path: {path}: ShareGPT file must be a JSON list")
    out = []
    for conv in data:
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list):
            continue
        for i, t in enumerate(turns):
            if isinstance(t, dict) and t.get("from") == "human" and t.get("value"):
                reply = next((u.get("value") for u in turns[i + 1:]
                              if isinstance(u, dict) and u.get("from") == "gpt"), None)
                mt = counter.count(reply) if reply else None
                out.append((t["value"], mt if mt else None))
                break
    return out


def _load_file(w: Workload, counter) -> list[tuple[str, Optional[int]]]:
    path = Path(w.path)
    if not path.is_file():
        raise ScenarioError(f"workload.path: {w.path}: no such file")
    rows = _read_jsonl(path) if w.source == "jsonl" else _read_sharegpt(path, counter)
    if not rows:
        raise ScenarioError(f"workload.path: {w.path}: no usable prompts in the file")
    return rows


# --- the plan -------------------------------------------------------------------------------

class WorkloadPlan:
    """An endless, reproducible stream of PromptSpec (files cycle) plus its labels."""

    def __init__(self, w: Workload):
        self.w = w
        self.counter = make_counter(w.tokenizer)
        self.rows = _load_file(w, self.counter) if w.source != "synthetic" else None
        self.prefix = ""
        if w.shared_prefix_tokens:
            self.prefix = self.counter.build(np.random.default_rng([w.seed, 1]),
                                             w.shared_prefix_tokens)

    @property
    def token_count(self) -> str:
        return "exact" if self.counter.exact else "approximate"

    def describe(self) -> dict:
        return {"source": self.w.source, "path": self.w.path, "tokenizer": self.counter.label,
                "token_count": self.token_count, "seed": self.w.seed,
                "shared_prefix_tokens": self.w.shared_prefix_tokens,
                "file_prompts": len(self.rows) if self.rows is not None else None}

    def _join(self, body: str) -> str:
        if not self.prefix:
            return body
        sep = "" if self.counter.label == "bytes" or not body else " "
        return self.prefix + sep + body

    def __iter__(self) -> Iterator[PromptSpec]:
        rng = np.random.default_rng([self.w.seed, 0])
        if self.rows is None:
            while True:  # draw lengths in blocks so the stream is the same however it is consumed
                plen = sample_lengths(self.w.prompt_tokens, rng, 64)
                olen = sample_lengths(self.w.output_tokens, rng, 64)
                for p, o in zip(plen, olen):
                    prompt = self._join(self.counter.build(rng, int(p)))
                    yield PromptSpec(prompt, self.counter.count(prompt), int(o))
        for prompt, mt in itertools.cycle(self.rows):
            if mt is None or not self.w.output_tokens_from_file:
                mt = int(sample_lengths(self.w.output_tokens, rng, 1)[0])
            prompt = self._join(prompt)
            yield PromptSpec(prompt, self.counter.count(prompt), int(mt))

    def take(self, n: int) -> list[PromptSpec]:
        return list(itertools.islice(iter(self), n))


def build_workload(w: Workload) -> WorkloadPlan:
    """Validate files/tokenizer now (ScenarioError naming the field) and return the plan."""
    return WorkloadPlan(w)
