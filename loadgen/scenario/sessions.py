"""Multi-turn sessions: conversations whose turns are sent one after another, each carrying the
conversation so far (with the answers the server actually gave).

    workload: {source: sessions, path: conversations.json}     ShareGPT JSON, EVERY human turn
    workload: {source: sessions, turns: {dist: ...}}           synthetic: turns per session,
                                                                user turns sized by prompt_tokens
        ─► SessionPlan ─► endless stream of Session(id, turns=[Turn(user, tokens, max_tokens,
                                                                     think_s)])  (files cycle)
        ─► loadgen.run.sessions (the driver: turn k+1 after turn k's answer + think_s)

Output lengths: ``workload.output_tokens`` when the scenario gives it, else the length of the
conversation's own assistant turn (by the workload's counter). ``think_s`` is drawn from
``workload.think_time_s`` for every turn after the first. Pure and seeded: the same scenario gives
the same sessions; only the assistant text comes from the server at run time.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from loadgen.scenario.strict import ScenarioError


@dataclass(frozen=True)
class Turn:
    user: str
    user_tokens: int            # by the workload's counter
    max_tokens: int
    think_s: float = 0.0        # pause after the previous turn's answer, before this turn


@dataclass(frozen=True)
class Session:
    id: str
    turns: tuple[Turn, ...]


def draw_seconds(d, rng: np.random.Generator) -> float:
    """One draw from a ``scenario.Seconds`` distribution."""
    if d.dist == "fixed":
        return float(d.value)
    if d.dist == "uniform":
        return float(rng.uniform(d.min, d.max))
    return float(rng.exponential(d.mean))


def read_sharegpt_sessions(path: str | Path) -> list[list[tuple[str, Optional[str]]]]:
    """Every conversation as [(human text, the gpt reply after it or None), ...], in file order."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(f"workload.path: {path}: no such file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
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
        pairs: list[tuple[str, Optional[str]]] = []
        for i, t in enumerate(turns):
            if isinstance(t, dict) and t.get("from") == "human" and t.get("value"):
                nxt = turns[i + 1] if i + 1 < len(turns) else None
                reply = nxt.get("value") if isinstance(nxt, dict) and nxt.get("from") == "gpt" else None
                pairs.append((t["value"], reply or None))
        if pairs:
            out.append(pairs)
    if not out:
        raise ScenarioError(f"workload.path: {path}: no conversation with a human turn")
    return out


class SessionPlan:
    """Sessions for a ``scenario.Workload`` with source "sessions"; ``counter`` sizes the text."""

    def __init__(self, w, counter, sample_lengths):
        self.w, self.counter, self._lengths = w, counter, sample_lengths
        self.convs = read_sharegpt_sessions(w.path) if w.path else None
        self.output_given = "output_tokens" in w.model_fields_set

    def _max_tokens(self, reply: Optional[str], rng: np.random.Generator) -> int:
        n = self.counter.count(reply) if reply and not self.output_given else 0
        return n if n > 0 else int(self._lengths(self.w.output_tokens, rng, 1)[0])

    def _turns(self, rng: np.random.Generator, pairs) -> Iterator[Turn]:
        for k, (user, reply) in enumerate(pairs):
            think = draw_seconds(self.w.think_time_s, rng) if k else 0.0
            yield Turn(user, self.counter.count(user), self._max_tokens(reply, rng), think)

    def __iter__(self) -> Iterator[Session]:
        rng = np.random.default_rng([self.w.seed, 11])
        for i in itertools.count():
            if self.convs is not None:
                pairs = self.convs[i % len(self.convs)]
            else:
                n = int(self._lengths(self.w.turns, rng, 1)[0])
                sizes = self._lengths(self.w.prompt_tokens, rng, n)
                pairs = [(self.counter.build(rng, int(s)), None) for s in sizes]
            yield Session(f"s{self.w.seed}-{i}", tuple(self._turns(rng, pairs)))

    def describe(self) -> dict:
        return {"source": "sharegpt" if self.convs is not None else "synthetic",
                "conversations": len(self.convs) if self.convs is not None else None,
                "turns": None if self.convs is not None else self.w.turns.model_dump(),
                "think_time_s": self.w.think_time_s.model_dump(),
                "output_tokens": "scenario" if self.output_given or self.convs is None
                else "the conversation's own assistant turns"}
