"""Multi-turn sessions: conversations whose turns are sent one after another, each carrying the
conversation so far (with the answers the server actually gave).

    workload: {source: sessions, path: conversations.json}     ShareGPT JSON, EVERY human turn
    workload: {source: sessions, turns: {dist: ...}}           synthetic: turns per session,
                                                                user turns sized by prompt_tokens
        ─► SessionPlan ─► endless stream of Session(id, turns=[Turn(user, tokens, max_tokens,
                                                                     think_s)])  (files cycle)
        ─► loadgen.engine.aio.sessions (the driver: turn k+1 after turn k's answer + think_s)

Output lengths: ``workload.output_tokens`` when the scenario gives it, else the length of the
conversation's own assistant turn (by the workload's counter). ``think_s`` is drawn from
``workload.think_time_s`` for every turn after the first. Pure and seeded: the same scenario gives
the same sessions; only the assistant text comes from the server at run time.
"""
from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from loadgen.scenario.limits import MAX_PROMPT_CHARS
from loadgen.scenario.strict import ScenarioError
from loadgen.scenario.trace import (_SURROGATE_ESCAPE, _finite, _no_constant, _short,
                                    no_lone_surrogate)

MAX_JSON_FILE_BYTES = 1 << 30   # a ShareGPT file is one JSON value, read whole: refused above


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


def _conversations(path: Path) -> Iterator[tuple[str, object]]:
    """("workload.path: FILE:LINE", element) for each element of the file's top-level JSON list,
    LINE being where the element starts. Not UTF-8, not JSON (NaN and Infinity included) or not
    a list, or a text with a lone surrogate: a ScenarioError naming the line; a file over
    MAX_JSON_FILE_BYTES: one naming the file, before it is read."""
    size = path.stat().st_size
    if size > MAX_JSON_FILE_BYTES:               # refused unread: the file is one JSON value
        raise ScenarioError(f"workload.path: {path}: {size:,} bytes, more than "
                            f"{MAX_JSON_FILE_BYTES:,} (a ShareGPT file is read whole; "
                            "docs/limits.md)")
    raw = path.read_bytes()
    surrogates = _SURROGATE_ESCAPE.search(raw) is not None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        no = raw.count(b"\n", 0, e.start) + 1
        raise ScenarioError(f"workload.path: {path}:{no}: not valid UTF-8") from None
    dec = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)
    ws = re.compile(r"[ \t\n\r]*")
    line, last = 1, 0

    def where(pos: int) -> str:
        nonlocal line, last
        line += text.count("\n", last, pos)
        last = pos
        return f"workload.path: {path}:{line}"

    def bad(pos: int, msg: str) -> ScenarioError:
        return ScenarioError(f"{where(pos)}: {msg}")

    pos = ws.match(text, 0).end()
    if not text.startswith("[", pos):
        raise bad(pos, "ShareGPT file must be a JSON list")
    pos = ws.match(text, pos + 1).end()
    if text.startswith("]", pos):
        return
    while True:
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise bad(e.pos, f"not valid JSON ({e.msg})") from None
        except (ValueError, RecursionError) as e:
            raise bad(pos, f"not valid JSON ({e})") from None
        at = where(pos)
        if surrogates:
            no_lone_surrogate(obj, at)
        yield at, obj
        pos = ws.match(text, end).end()
        if text.startswith("]", pos):
            if text[ws.match(text, pos + 1).end():]:
                raise bad(pos + 1, "not valid JSON (extra data after the list)")
            return
        if not text.startswith(",", pos):
            raise bad(pos, "not valid JSON (expected ',' or ']')")
        pos = ws.match(text, pos + 1).end()


def _turns(conv, at: str) -> list:
    """The ``conversations`` list of one element (none: the element is skipped), each turn
    checked: {"from": str, "value": str}."""
    turns = conv.get("conversations") if isinstance(conv, dict) else None
    if not isinstance(turns, list):
        return []
    for j, t in enumerate(turns):
        if not isinstance(t, dict):
            raise ScenarioError(f"{at}: conversations[{j}]: must be an object")
        if not isinstance(t.get("from"), str):
            raise ScenarioError(f"{at}: conversations[{j}].from: must be a string")
        v = t.get("value")
        if not isinstance(v, str):
            raise ScenarioError(f"{at}: conversations[{j}].value: must be a string "
                                f"(got {_short(v)})")
        if len(v) > MAX_PROMPT_CHARS:
            raise ScenarioError(f"{at}: conversations[{j}].value: longer than "
                                f"{MAX_PROMPT_CHARS:,} characters")
    return turns


def read_sharegpt_sessions(path: str | Path) -> list[list[tuple[str, Optional[str]]]]:
    """Every conversation as [(human text, the gpt reply after it or None), ...], in file order.
    Every element is checked first (``workload.path: FILE:LINE: field: problem``)."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(f"workload.path: {path}: no such file")
    out = []
    for at, conv in _conversations(p):
        turns = _turns(conv, at)
        pairs: list[tuple[str, Optional[str]]] = []
        for i, t in enumerate(turns):
            if t["from"] == "human" and t["value"]:
                nxt = turns[i + 1] if i + 1 < len(turns) else None
                reply = nxt["value"] if nxt is not None and nxt["from"] == "gpt" else None
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
