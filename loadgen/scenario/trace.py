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

Every line is checked before the run (``workload.path: FILE:LINE: field: problem``, exit 2): UTF-8, JSON without
NaN/Infinity, a finite timestamp in [0, 1e14] ms, lengths in [1, 1,048,576] tokens, hash ids
non-negative integers, text fields strings with no lone surrogate (JSON "\\ud800" unpaired); a line
longer than MAX_LINE_BYTES is refused before it is read whole; a replay longer than 7 days is refused.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from loadgen.scenario.limits import (MAX_DURATION_S, MAX_FILE_ROWS, MAX_LINE_BYTES,
                                    MAX_PROMPT_CHARS, MAX_TOKENS)
from loadgen.scenario.strict import ScenarioError

NS = 1_000_000_000
MAX_TIMESTAMP_MS = 1e14         # ~3,000 years: epoch milliseconds fit, 1e15 does not


@dataclass(frozen=True)
class TraceRow:
    timestamp_ms: float
    output_length: Optional[int] = None
    input_length: Optional[int] = None           # mooncake
    hash_ids: tuple[int, ...] = ()               # mooncake
    prompt: Optional[str] = None                 # jsonl
    messages: Optional[list] = field(default=None, compare=False)   # jsonl, chat
    where: str = field(default="", compare=False)   # "FILE:LINE", for messages about the row


def positive_int(row: dict, key: str, where: str, required: bool) -> Optional[int]:
    """``row[key]`` as a length in tokens: an integer in [1, MAX_TOKENS] (input_length: from 0)."""
    v = row.get(key)
    if v is None and not required:
        return None
    lo = 0 if key == "input_length" else 1
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= MAX_TOKENS:
        got = "missing" if v is None else f"got {_short(v)}"
        raise ScenarioError(f"{where}: {key}: must be an integer from {lo} to {MAX_TOKENS:,} "
                            f"tokens ({got})")
    return v


def _short(v) -> str:
    r = json.dumps(v) if not isinstance(v, str) else repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def prompt_text(v, key: str, where: str) -> str:
    """``v`` as a prompt: a string of at most MAX_PROMPT_CHARS characters."""
    if not isinstance(v, str):
        raise ScenarioError(f"{where}: {key}: must be a string (got {_short(v)})")
    if len(v) > MAX_PROMPT_CHARS:
        raise ScenarioError(f"{where}: {key}: longer than {MAX_PROMPT_CHARS:,} characters")
    return v


def _messages(v, where: str) -> list:
    if not isinstance(v, list) or not v:
        raise ScenarioError(f"{where}: messages: must be a non-empty list")
    for i, m in enumerate(v):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ScenarioError(f"{where}: messages[{i}]: must be an object with a string 'role'")
        c = m.get("content")
        if c is not None and not isinstance(c, (str, list)):
            raise ScenarioError(f"{where}: messages[{i}].content: must be a string or a list "
                                f"(got {_short(c)})")
        if isinstance(c, str):
            prompt_text(c, f"messages[{i}].content", where)
    return v


def _row(obj, fmt: str, where: str) -> TraceRow:
    if not isinstance(obj, dict):
        raise ScenarioError(f"{where}: not a JSON object")
    ts = obj.get("timestamp")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not 0 <= ts <= MAX_TIMESTAMP_MS:
        raise ScenarioError(f"{where}: timestamp: needs a finite number of ms from 0 to "
                            f"{MAX_TIMESTAMP_MS:.0e} (got {_short(ts) if 'timestamp' in obj else 'none'})")
    if fmt == "mooncake":
        ids = obj.get("hash_ids", [])
        if (not isinstance(ids, list) or len(ids) > MAX_TOKENS
                or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2 ** 64
                           for i in ids)):
            raise ScenarioError(f"{where}: hash_ids: must be a list of non-negative integers")
        return TraceRow(float(ts), positive_int(obj, "output_length", where, True),
                        positive_int(obj, "input_length", where, True), tuple(ids), where=where)
    prompt, messages = obj.get("prompt"), obj.get("messages")
    if prompt is None and messages is None:
        raise ScenarioError(f"{where}: needs a string 'prompt' or a list 'messages'")
    return TraceRow(float(ts), positive_int(obj, "max_tokens", where, False),
                    prompt=prompt_text(prompt, "prompt", where) if prompt is not None else None,
                    messages=_messages(messages, where) if prompt is None else None, where=where)


def _finite(text: str):
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"number {text} is out of range")
    return x


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")   # \ud800..\udfff: JSON's only way to one


def no_lone_surrogate(obj, where: str, at: str = "") -> None:
    """A ScenarioError naming the field when a text (or key) of ``obj`` holds a lone UTF-16
    surrogate (JSON "\\ud800" unpaired): no request body can carry it as UTF-8."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ScenarioError(f"{where}: {at or 'text'}: not valid Unicode (a lone surrogate "
                                f"\\u{ord(obj[e.start]):04x} at character {e.start + 1})") from None
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            no_lone_surrogate(v, where, f"{at}[{i}]")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            no_lone_surrogate(k, where, f"{at}.{k!r} (a key)".lstrip("."))
            no_lone_surrogate(v, where, f"{at}.{k}" if at else k)


def bounded_lines(f, where_of) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of a binary file, each read at most MAX_LINE_BYTES (+1) bytes at
    a time: a longer line is a ScenarioError before the rest of it is read."""
    no = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        no += 1
        if len(raw) > MAX_LINE_BYTES and not (len(raw) == MAX_LINE_BYTES + 1 and raw.endswith(b"\n")):
            raise ScenarioError(f"{where_of(no)}: line longer than {MAX_LINE_BYTES:,} bytes "
                                "(docs/limits.md)")
        yield no, raw


def jsonl_objects(path: str | Path, key: str = "workload.path") -> Iterator[tuple[str, object]]:
    """("KEY: FILE:LINE", the parsed line) for every non-blank line; a line that is not
    UTF-8 or not JSON (NaN, Infinity and numbers beyond a float's range included), longer than
    MAX_LINE_BYTES, or with a lone surrogate in a text is a ScenarioError naming it:
    ``KEY: FILE:LINE: problem`` (KEY: workload.path, or workload.dataset.path)."""
    with open(path, "rb") as f:
        for no, raw in bounded_lines(f, lambda n: f"{key}: {path}:{n}"):
            where = f"{key}: {path}:{no}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ScenarioError(f"{where}: not valid UTF-8 (byte {e.start + 1} of the line)") \
                    from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line, parse_float=_finite, parse_constant=_no_constant)
            except json.JSONDecodeError as e:
                raise ScenarioError(f"{where}: not valid JSON ({e.msg})") from None
            except (ValueError, RecursionError) as e:
                raise ScenarioError(f"{where}: not valid JSON ({e})") from None
            if _SURROGATE_ESCAPE.search(raw):
                no_lone_surrogate(obj, where)
            yield where, obj


def read_trace(path: str | Path, fmt: str) -> list[TraceRow]:
    """The rows of a trace file in timestamp order (stable for equal times)."""
    if not Path(path).is_file():
        raise ScenarioError(f"workload.path: {path}: no such file")
    rows = []
    for where, obj in jsonl_objects(path):
        if len(rows) >= MAX_FILE_ROWS:
            raise ScenarioError(f"{where}: more than {MAX_FILE_ROWS:,} rows (docs/limits.md)")
        rows.append(_row(obj, fmt, where))
    if not rows:
        raise ScenarioError(f"workload.path: {path}: no requests in the trace")
    return sorted(rows, key=lambda r: r.timestamp_ms)


def trace_offsets_ns(rows: list[TraceRow], time_scale: float = 1.0, n: Optional[int] = None,
                     duration_s: Optional[float] = None) -> np.ndarray:
    """Send offsets (int64 ns from t0) of the first ``n`` rows and/or those before ``duration_s``
    (on the scaled time axis). shape: (count,) int64, non-decreasing, first 0. A replay longer
    than MAX_DURATION_S is a ScenarioError naming the row that ends it."""
    if time_scale <= 0:
        raise ValueError("time_scale must be > 0")
    ts = np.array([r.timestamp_ms for r in rows], dtype=np.float64)
    if len(ts):
        last = len(ts) - 1 if n is None else min(n, len(ts)) - 1
        span_s = (ts[last] - ts[0]) * 1e-3 * time_scale
        if span_s > MAX_DURATION_S and (duration_s is None or duration_s > MAX_DURATION_S):
            raise ScenarioError(
                f"{rows[last].where or 'workload.path'}: timestamp: the replay would last "
                f"{span_s:,.0f} s (load.time_scale {time_scale:g}), more than {MAX_DURATION_S:,.0f}"
                " (7 days, docs/limits.md)")
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
