"""Workload: what each request asks for — (prompt, prompt_tokens, max_tokens), seeded.

    scenario.Workload ─► counter (words | bytes | tokenizer.json) ─► source:
        synthetic  lengths drawn from Dist (fixed / uniform / normal / lognormal, clipped)
        jsonl      {"prompt": str, "max_tokens": int?} per line, in file order
        dataset    workload.dataset (dataset.py): rows with an expected answer, or the seeded
                   builtin arithmetic set; PromptSpec.expected carries the check
        sharegpt   [{"conversations": [{"from": "human"|"gpt", "value": str}, ...]}, ...]:
                   first human turn = prompt; the gpt reply after it sets max_tokens
        trace      timestamped rows (loadgen.scenario.trace), in time order, not cycled; prompts
                   built block by block from hash ids; the send times come with them
    ─► optional shared prefix in front of every prompt ─► PromptSpec stream (cycles files)
    ─► workload.images (chat): request k carries images k·count.. of a seeded pool (images.py)
    ─► workload.audio (transcriptions): request k carries clip k mod pool of a seeded pool
       (audio.py); its text prompt is not sent (prompt "", prompt_tokens None)
    ─► inputs_per_request N > 1 (embeddings): N consecutive prompts make one PromptSpec whose
       prompt is the list of the N texts, prompt_tokens their sum (max_tokens: the first's)

Token counts are exact for "bytes" (1 token per ASCII byte, the JAX server's ByteTokenizer) and
for a tokenizer.json; "words" counts whitespace-separated common English words (about one BPE
token each), labelled ``approximate``.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator, Optional, Union

import msgspec
import numpy as np

from msgspec.structs import replace

from loadgen.scenario.model import Dist, ScenarioError, Workload
from loadgen.scenario.images import pool_for
from loadgen.scenario.dataset import load_dataset
from loadgen.scenario import audio as audio_clips
from loadgen.scenario.tokens import make_counter
from loadgen.scenario.sessions import SessionPlan, read_sharegpt_sessions
from loadgen.scenario.limits import MAX_FILE_ROWS, MAX_TOKENS
from loadgen.scenario.trace import (TracePrompts, jsonl_objects, positive_int, prompt_text,
                                    read_trace, trace_offsets_ns)

class PromptSpec(msgspec.Struct, frozen=True):
    """One request as the plan holds it, from the workload to the wire (the workload's stream
    leaves ``id``/``phase``/``offset_ns`` at their defaults; engine.core.plan gives each its id,
    phase and offset: ``engine.core.plan.Spec`` is this type). Frozen and cheap to build (a
    msgspec Struct); the per-send state (scheduled time, session turn, headers) is the
    client's RequestSpec (http_client.py), made from it by ``RequestSpec.of``."""

    prompt: Union[str, list, None]   # a list of texts: one embeddings request of several inputs
    prompt_tokens: Optional[int]     # by the workload's counter (see WorkloadPlan.token_count)
    max_tokens: Optional[int]        # None: a closed loop's owed id (engine.core.plan.started)
    messages: Optional[tuple] = None   # chat messages as given (trace jsonl); else prompt is the user turn
    images: Optional[tuple] = None     # workload.images: data URLs sent after the text (chat)
    expected: Optional[tuple] = None   # workload.dataset: dataset.Expected (the answer's check)
    audio: Optional[audio_clips.Clip] = None   # workload.audio: the clip sent (transcriptions)
    id: int = -1                       # engine.core.plan: the request id (warm-up 0.., measured W..)
    phase: str = "measured"            # "warmup" | "measured"
    offset_ns: Optional[int] = None    # from t0 (server/offline); None: closed loop (now)


# --- lengths --------------------------------------------------------------------------------

def sample_lengths(d: Dist, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` integer lengths from ``d``, clipped to [d.min, d.max]. shape: (n,) int64."""
    hi = d.max if d.max is not None else MAX_TOKENS
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
    for where, row in jsonl_objects(path):
        if not isinstance(row, dict):
            raise ScenarioError(f"{where}: not a JSON object")
        if "prompt" not in row:
            raise ScenarioError(f"{where}: prompt: missing (each line needs a string 'prompt')")
        if len(out) >= MAX_FILE_ROWS:
            raise ScenarioError(f"{where}: more than {MAX_FILE_ROWS:,} rows (docs/limits.md)")
        out.append((prompt_text(row["prompt"], "prompt", where),
                    positive_int(row, "max_tokens", where, False)))
    return out


def _read_sharegpt(path: Path, counter) -> list[tuple[str, Optional[int]]]:
    """The first human turn of every conversation; the gpt reply after it sets max_tokens."""
    out = []
    for pairs in read_sharegpt_sessions(path):
        prompt, reply = pairs[0]
        mt = counter.count(reply) if reply else None
        out.append((prompt, mt if mt else None))
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
        self.trace_rows = read_trace(w.path, w.format) if w.source == "trace" else None
        self.trace = TracePrompts(self.counter, w.seed, w.block_tokens) if self.trace_rows else None
        self.rows = _load_file(w, self.counter) if w.source in ("jsonl", "sharegpt") else None
        self.sessions = (SessionPlan(w, self.counter, sample_lengths) if w.source == "sessions"
                         else None)
        self.prefix = ""
        if w.shared_prefix_tokens:
            self.prefix = self.counter.build(np.random.default_rng([w.seed, 1]),
                                             w.shared_prefix_tokens)
        self.images = pool_for(w.images, w.seed)    # workload.images (made once, here)
        self.dataset = load_dataset(w.dataset) if w.dataset is not None else None
        self.audio = audio_clips.pool_for(w.audio, w.seed)   # workload.audio (made once, here)
        self.groups: list[str] = []
        self.group_p: Optional[np.ndarray] = None
        if w.prefix is not None:
            self.groups = [self.counter.build(np.random.default_rng([w.seed, 3, g]), w.prefix.tokens)
                           for g in range(w.prefix.groups)]
            k = np.arange(1, w.prefix.groups + 1, dtype=float)
            weights = k ** -w.prefix.zipf_s if w.prefix.popularity == "zipf" else np.ones_like(k)
            self.group_p = weights / weights.sum()

    @property
    def token_count(self) -> str:
        return "exact" if self.counter.exact else "approximate"

    def describe(self) -> dict:
        return {"source": self.w.source, "path": self.w.path, "tokenizer": self.counter.label,
                "token_count": self.token_count, "seed": self.w.seed,
                "shared_prefix_tokens": self.w.shared_prefix_tokens,
                "prefix": self.w.prefix.model_dump() if self.w.prefix else None,
                "file_prompts": len(self.rows) if self.rows is not None else None,
                "trace": (None if self.trace is None else
                          {"format": self.w.format, "rows": len(self.trace_rows),
                           **self.trace.describe()}),
                "sessions": self.sessions.describe() if self.sessions is not None else None,
                "images": self.images.describe() if self.images is not None else None,
                "dataset": (None if self.dataset is None else
                            {"source": self.w.dataset.label(), "items": len(self.dataset)}),
                "audio": self.audio.describe() if self.audio is not None else None}

    def trace_offsets(self, load) -> "np.ndarray":
        """Send offsets of a trace run (``load``: time_scale, num_requests, duration_s)."""
        return trace_offsets_ns(self.trace_rows, load.time_scale, load.num_requests,
                                load.duration_s)

    def _join(self, body: str, prefix: Optional[str] = None) -> str:
        prefix = self.prefix if prefix is None else prefix
        if not prefix:
            return body
        sep = "" if self.counter.label == "bytes" or not body else " "
        return prefix + sep + body

    def _group_prefix(self, rng: np.random.Generator) -> Optional[str]:
        """One prefix group's text, drawn by popularity (None without prefix groups)."""
        if not self.groups:
            return None
        return self.groups[int(rng.choice(len(self.groups), p=self.group_p))]

    def _trace_specs(self, rng: np.random.Generator) -> Iterator[PromptSpec]:
        for i, row in enumerate(self.trace_rows):
            mt = row.output_length
            if mt is None or not self.w.output_tokens_from_file:
                mt = int(sample_lengths(self.w.output_tokens, rng, 1)[0])
            text, n = self.trace.prompt(row, i)
            prompt = self._join(text)
            yield PromptSpec(prompt, self.counter.count(prompt) if self.prefix else n, int(mt),
                             tuple(row.messages) if row.messages else None)

    def warmup_specs(self) -> Iterator[PromptSpec]:
        """Warm-up prompts. A trace's are unique text of its rows' lengths, so warming up does not
        fill a prefix cache with the blocks the measured replay will send; else the main stream."""
        rng = np.random.default_rng([self.w.seed, 9])
        if self.sessions is not None:       # single turns of the sessions' first-turn sizes
            for s in self.sessions:
                prompt = self.counter.build(rng, max(1, s.turns[0].user_tokens))
                yield PromptSpec(prompt, self.counter.count(prompt), s.turns[0].max_tokens)
        if self.trace_rows is None:
            yield from iter(self)
            return
        for row in itertools.cycle(self.trace_rows):
            n = row.input_length or self.counter.count(row.prompt or "") or 16
            prompt = self.counter.build(rng, n)
            yield PromptSpec(prompt, self.counter.count(prompt), int(row.output_length or 16))

    def __iter__(self) -> Iterator[PromptSpec]:
        if self.images is not None:       # request k's images: dealt in turn from the pool
            for k, ps in enumerate(self._specs()):
                yield replace(ps, images=self.images.for_request(k))
            return
        if self.audio is not None:        # request k's clip: dealt in turn from the pool
            for k, ps in enumerate(self._specs()):
                yield replace(ps, prompt="", prompt_tokens=None, audio=self.audio.for_request(k))
            return
        n = self.w.inputs_per_request
        one = self._specs()
        if n <= 1:
            yield from one
            return
        while True:                    # N consecutive prompts of the same stream per request
            group = list(itertools.islice(one, n))
            if len(group) < n:
                return
            yield PromptSpec([g.prompt for g in group], sum(g.prompt_tokens for g in group),
                             group[0].max_tokens)

    def _specs(self) -> Iterator[PromptSpec]:
        rng = np.random.default_rng([self.w.seed, 0])
        if self.trace_rows is not None:
            yield from self._trace_specs(rng)
            return
        if self.sessions is not None:   # a session run is driven by loadgen.engine.aio.sessions
            yield from self.warmup_specs()
            return
        if self.dataset is not None:    # workload.dataset: each prompt with its expected answer
            yield from self._dataset_specs(rng)
            return
        if self.rows is None:
            while True:  # draw lengths in blocks so the stream is the same however it is consumed
                plen = sample_lengths(self.w.prompt_tokens, rng, 64)
                olen = sample_lengths(self.w.output_tokens, rng, 64)
                for p, o in zip(plen, olen):
                    prompt = self._join(self.counter.build(rng, int(p)), self._group_prefix(rng))
                    yield PromptSpec(prompt, self.counter.count(prompt), int(o))
        for prompt, mt in itertools.cycle(self.rows):
            if mt is None or not self.w.output_tokens_from_file:
                mt = int(sample_lengths(self.w.output_tokens, rng, 1)[0])
            prompt = self._join(prompt)
            yield PromptSpec(prompt, self.counter.count(prompt), int(mt))

    def _dataset_specs(self, rng: np.random.Generator) -> Iterator[PromptSpec]:
        for it in itertools.cycle(self.dataset):
            mt = it.max_tokens
            if mt is None or not self.w.output_tokens_from_file:
                mt = int(sample_lengths(self.w.output_tokens, rng, 1)[0])
            yield PromptSpec(it.prompt, self.counter.count(it.prompt), int(mt), it.messages,
                             None, it.expected)

    def take(self, n: int) -> list[PromptSpec]:
        return list(itertools.islice(iter(self), n))


def build_workload(w: Workload) -> WorkloadPlan:
    """Validate files/tokenizer now (ScenarioError naming the field) and return the plan."""
    return WorkloadPlan(w)
