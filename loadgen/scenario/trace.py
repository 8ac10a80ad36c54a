"""Trace replay: timestamped requests from a file, sent at the trace's times, with prompts whose
shared leading blocks are shared text, token for token.

    workload: {source: trace, path: FILE, format: mooncake | jsonl, block_tokens: 512}
    load:     {mode: trace, time_scale: 1.0, num_requests: N | duration_s: S}

    FILE ─► read_trace() ─► [TraceRow] (timestamp order) ─► trace_offsets_ns() ─► Schedule("trace")
                                        └► TracePrompts.prompt() ─► PromptSpec stream (workload.py)

Formats (one JSON object a line):
    mooncake  {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [id, ...]}
              one id per ``block_tokens`` tokens of the prompt (512 in Mooncake's traces); equal
              leading ids = a shared prefix. Block ``id`` is one deterministic text (seeded by
              (workload.seed, id)), so every request naming it sends the same tokens there, and a
              prefix cache sees exactly the reuse the trace implies. The last block is cut to make
              the prompt ``input_length`` tokens long; tokens the ids do not cover are unique text.
    jsonl     {"timestamp": ms, "prompt": str | "messages": [...], "max_tokens": m}

``time_scale`` multiplies the trace's gaps: 0.5 replays twice as fast, 2 half as fast. Offsets are
relative to the first row sent. Pure: no I/O beyond reading the file; no clock.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from loadgen.scenario.strict import ScenarioError

NS = 1_000_000_000


@dataclass(frozen=True)
class TraceRow:
    timestamp_ms: float
    output_length: Optional[int] = None
    input_length: Optional[int] = None           # mooncake
    hash_ids: tuple[int, ...] = ()               # mooncake
    prompt: Optional[str] = None                 # jsonl
    messages: Optional[list] = field(default=None, compare=False)   # jsonl, chat


def positive_int(row: dict, key: str, where: str, required: bool) -> Optional[int]:
    v = row.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < (1 if key != "input_length" else 0):
        raise ScenarioError(f"{where}: '{key}' must be a positive integer")
    return v


def _row(obj, fmt: str, where: str) -> TraceRow:
    if not isinstance(obj, dict):
        raise ScenarioError(f"{where}: not a JSON object")
    ts = obj.get("timestamp")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool) or ts < 0:
        raise ScenarioError(f"{where}: needs a non-negative number 'timestamp' (ms)")
    if fmt == "mooncake":
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise ScenarioError(f"{where}: 'hash_ids' must be a list of integers")
        return TraceRow(float(ts), positive_int(obj, "output_length", where, True),
                        positive_int(obj, "input_length", where, True), tuple(ids))
    prompt, messages = obj.get("prompt"), obj.get("messages")
    if not isinstance(prompt, str) and not (isinstance(messages, list) and messages):
        raise ScenarioError(f"{where}: needs a string 'prompt' or a list 'messages'")
    return TraceRow(float(ts), positive_int(obj, "max_tokens", where, False),
                    prompt=prompt if isinstance(prompt, str) else None,
                    messages=messages if isinstance(messages, list) else None)


def jsonl_objects(path: str | Path) -> Iterator[tuple[str, object]]:
    """("workload.path: FILE line N", the parsed line) for every non-blank line; a line that is
    not JSON is a ScenarioError naming it."""
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ScenarioError(f"workload.path: {path} line {no}: not valid JSON ({e.msg})") \
                    from None
            yield f"workload.path: {path} line {no}", obj


def read_trace(path: str | Path, fmt: str) -> list[TraceRow]:
    """The rows of a trace file in timestamp order (stable for equal times)."""
    if not Path(path).is_file():
        raise ScenarioError(f"workload.path: {path}: no such file")
    rows = [_row(obj, fmt, where) for where, obj in jsonl_objects(path)]
    if not rows:
        raise ScenarioError(f"workload.path: {path}: no requests in the trace")
    return sorted(rows, key=lambda r: r.timestamp_ms)


def trace_offsets_ns(rows: list[TraceRow], time_scale: float = 1.0, n: Optional[int] = None,
                     duration_s: Optional[float] = None) -> np.ndarray:
    """Send offsets (int64 ns from t0) of the first ``n`` rows and/or those before ``duration_s``
    (on the scaled time axis). shape: (count,) int64, non-decreasing, first 0."""
    if time_scale <= 0:
        raise ValueError("time_scale must be > 0")
    ts = np.array([r.timestamp_ms for r in rows], dtype=np.float64)
    off = np.round((ts - ts[0]) * 1e6 * time_scale).astype(np.int64) if len(ts) else ts.astype(np.int64)
    if n is not None:
        off = off[:n]
    if duration_s is not None:
        off = off[off < duration_s * NS]
    return off


class TracePrompts:
    """Prompt text for trace rows: hash id ─► one block of ``block_tokens`` tokens (cached)."""

    def __init__(self, counter, seed: int, block_tokens: int):
        self.counter, self.seed, self.block_tokens = counter, seed, block_tokens
        self._blocks: dict[int, str] = {}
        self.max_abs_error = 0          # |prompt tokens − input_length| over the rows built
        self.rows_off = 0               # rows whose prompt length could not match exactly

    def block(self, hash_id: int) -> str:
        b = self._blocks.get(hash_id)
        if b is None:
            rng = np.random.default_rng([self.seed, 7, hash_id & 0xFFFFFFFF, hash_id >> 32])
            b = self._blocks[hash_id] = self.counter.build(rng, self.block_tokens)
        return b

    def _unique(self, index: int, n: int) -> str:
        return self.counter.build(np.random.default_rng([self.seed, 8, index]), n)

    def text(self, row: TraceRow, index: int) -> str:
        """The prompt of a mooncake row: its blocks in order, the last cut, unique text after."""
        want = row.input_length or 0
        parts, have = [], 0
        for h in row.hash_ids:
            if have >= want:
                break
            take = min(self.block_tokens, want - have)
            blk = self.block(h)
            parts.append(blk if take == self.block_tokens else self.counter.truncate(blk, take))
            have += take
        if have < want:
            parts.append(self._unique(index, want - have))
        return self.counter.join(parts)

    def prompt(self, row: TraceRow, index: int) -> tuple[str, int]:
        """(prompt text, its token count by the counter); tracks the length error."""
        if row.prompt is not None or row.messages is not None:
            text = row.prompt if row.prompt is not None else "\n".join(
                str(m.get("content", "")) for m in row.messages if isinstance(m, dict))
            return text, self.counter.count(text)
        text = self.text(row, index)
        got = self.counter.count(text)
        err = abs(got - (row.input_length or 0))
        if err:
            self.rows_off += 1
            self.max_abs_error = max(self.max_abs_error, err)
        return text, got

    def describe(self) -> dict:
        return {"block_tokens": self.block_tokens, "distinct_blocks": len(self._blocks),
                "rows_length_mismatch": self.rows_off, "max_length_error_tokens": self.max_abs_error}
