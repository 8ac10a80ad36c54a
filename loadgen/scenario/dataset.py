"""workload.dataset: prompts that carry their expected answer (accuracy beside speed).

    workload.dataset: {path: FILE.jsonl}       rows {prompt | messages, expected: {exact | regex |
                                               choices}, max_tokens?}, in file order, cycled
    workload.dataset: {builtin: arithmetic,    seeded sums and products of two numbers, one exact
                       seed: S, size: N}       answer each (no download); N items, cycled
        ─► DatasetPlan.items: (prompt, messages, max_tokens, Expected) ─► WorkloadPlan (its
           PromptSpec.expected) ─► every engine's request ─► the tally ─► request.finish
           ─► loadgen.client.accuracy.grade ─► Record.correct

``Expected`` is a plain tuple (kind, value): kind "exact" (value: str), "regex" (a pattern,
compiled here once with RE2 to refuse a bad one or one RE2 cannot match in linear time), "choices" (a tuple of accepted strings). A row without
``expected``, or with a bad one, is one ScenarioError naming FILE:LINE (the CLI: one line, exit 2).
Pure: numpy and the standard library; nothing here runs on the stamping path.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, NamedTuple, Optional

import numpy as np
from pydantic import Field

from loadgen.scenario.limits import MAX_FILE_ROWS, MAX_SEED
from loadgen.scenario.pattern import compile_pattern
from loadgen.scenario.strict import ScenarioError, Strict
from loadgen.scenario.trace import _messages, jsonl_objects, positive_int, prompt_text

KINDS = ("exact", "regex", "choices")
MAX_EXPECTED_CHARS = 10_000
ARITHMETIC_PROMPT = "What is {a} {op} {b}? Answer with the number only."


class Dataset(Strict):
    """workload.dataset: a file of prompts with expected answers, or a built-in seeded set."""

    path: Optional[str] = None            # JSONL: {prompt | messages, expected, max_tokens?}
    builtin: Optional[Literal["arithmetic"]] = None
    seed: int = Field(0, ge=0, le=MAX_SEED)   # builtin: which items
    size: int = Field(256, ge=1, le=MAX_FILE_ROWS)   # builtin: distinct items before repeating
    ONE_OF = (("path", "builtin"), "give exactly one of 'path' (a JSONL file) or 'builtin: arithmetic'")

    def label(self) -> str:
        return (f"builtin {self.builtin} (seed {self.seed}, {self.size} items)"
                if self.builtin else f"file {self.path}")


class Expected(NamedTuple):
    kind: str                 # exact | regex | choices
    value: object             # str, or a tuple of str (choices)


class Item(NamedTuple):
    prompt: str
    messages: Optional[tuple]
    max_tokens: Optional[int]
    expected: Expected


def _text(v, key: str, where: str) -> str:
    if not isinstance(v, str) or not v.strip() or len(v) > MAX_EXPECTED_CHARS:
        raise ScenarioError(f"{where}: {key}: must be a non-empty string of at most "
                            f"{MAX_EXPECTED_CHARS:,} characters")
    return v


def expected_of(row: dict, where: str) -> Expected:
    """The row's ``expected`` object: exactly one of exact | regex | choices."""
    e = row.get("expected")
    if e is None:
        raise ScenarioError(f"{where}: expected: missing (each row needs 'expected': "
                            "{exact | regex | choices})")
    if not isinstance(e, dict) or len(e) != 1 or next(iter(e)) not in KINDS:
        raise ScenarioError(f"{where}: expected: must be an object with exactly one of "
                            f"{', '.join(KINDS)}")
    kind, v = next(iter(e.items()))
    if kind == "choices":
        if not isinstance(v, list) or not v:
            raise ScenarioError(f"{where}: expected.choices: must be a non-empty list of strings")
        return Expected(kind, tuple(_text(c, f"expected.choices[{i}]", where)
                                    for i, c in enumerate(v)))
    v = _text(v, f"expected.{kind}", where)
    if kind == "regex":             # RE2 (linear time) is what grades it: refuse what it can't
        try:
            re.compile(v)
        except re.error as err:
            raise ScenarioError(f"{where}: expected.regex: not a valid pattern ({err})") from None
        try:
            compile_pattern(v)
        except ValueError as err:
            raise ScenarioError(f"{where}: expected.regex: {err}") from None
    return Expected(kind, v)


def _message_text(messages: list) -> str:
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out += [str(p.get("text", "")) for p in c if isinstance(p, dict)]
    return " ".join(out)


def read_dataset_file(path: str) -> list[Item]:
    """Every row of a dataset JSONL file, checked (ScenarioError naming FILE:LINE)."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(f"workload.dataset.path: {path}: no such file")
    out: list[Item] = []
    for where, row in jsonl_objects(p, "workload.dataset.path"):
        if not isinstance(row, dict):
            raise ScenarioError(f"{where}: not a JSON object")
        if ("prompt" in row) == ("messages" in row):
            raise ScenarioError(f"{where}: give exactly one of 'prompt' (a string) or 'messages'")
        if len(out) >= MAX_FILE_ROWS:
            raise ScenarioError(f"{where}: more than {MAX_FILE_ROWS:,} rows (docs/limits.md)")
        expected = expected_of(row, where)
        mt = positive_int(row, "max_tokens", where, False)
        if "messages" in row:
            msgs = _messages(row["messages"], where)
            out.append(Item(_message_text(msgs), tuple(msgs), mt, expected))
        else:
            out.append(Item(prompt_text(row["prompt"], "prompt", where), None, mt, expected))
    if not out:
        raise ScenarioError(f"workload.dataset.path: {path}: no rows in the file")
    return out


def arithmetic(seed: int, size: int) -> list[Item]:
    """``size`` seeded questions: a + b or a * b with a, b in [2, 999]; the exact answer."""
    rng = np.random.default_rng([seed, 30])
    a = rng.integers(2, 1000, size=size)
    b = rng.integers(2, 1000, size=size)
    mul = rng.random(size) < 0.5
    out = []
    for x, y, m in zip(a.tolist(), b.tolist(), mul.tolist()):
        op, ans = ("*", x * y) if m else ("+", x + y)
        out.append(Item(ARITHMETIC_PROMPT.format(a=x, op=op, b=y), None, None,
                        Expected("exact", str(ans))))
    return out


def load_dataset(d: Dataset) -> list[Item]:
    return arithmetic(d.seed, d.size) if d.builtin == "arithmetic" else read_dataset_file(d.path)


def describe_check(d: Dataset) -> dict:
    """meta.json ``accuracy``: that a check ran, on what, by which rule."""
    return {"dataset": d.label(), "builtin": d.builtin, "path": d.path, "seed": d.seed,
            "rule": "after the stream: exact = the answer's text, trimmed, equals the expected "
                    "string; regex = RE2 finds the pattern in the answer; choices = the "
                    "trimmed answer equals one of them; a failed request, or one cut short "
                    "(finish_reason length) whose text could still become right, is not "
                    "checkable (correct null)"}


def check_fits(dataset: Optional[Dataset], workload, api) -> None:
    """The scenario-level rules: ValueError (one line) when the dataset cannot run as asked.
    An answer ends when complete, so api.ignore_eos defaults to false here (as for tools; an
    explicit api.ignore_eos: true is kept, and its answers then run to max_tokens)."""
    if dataset is None:
        return
    if "ignore_eos" not in api.model_fields_set:
        api.ignore_eos = False
    if workload.source != "synthetic" or workload.path:
        raise ValueError(f"workload.dataset: the dataset is the prompt source (leave "
                         f"workload.source/path unset; got source {workload.source})")
    if api.endpoint not in ("chat", "completions", "responses"):
        raise ValueError("workload.dataset: answers are checked on generation endpoints "
                         f"(api.endpoint chat, completions or responses; got {api.endpoint})")
    if workload.prefix is not None or workload.shared_prefix_tokens:
        raise ValueError("workload.dataset: not with workload.prefix / shared_prefix_tokens "
                         "(the prompt is the dataset's question as written)")


def check_endpoint(items: Optional[list], path: Optional[str], endpoint: str) -> None:
    """Rows given as ``messages`` go to the chat (or responses) endpoint only: ScenarioError."""
    if items and endpoint == "completions" and any(it.messages for it in items):
        raise ScenarioError(f"workload.dataset.path: {path}: rows with 'messages' need "
                            "api.endpoint chat or responses (completions sends a prompt)")
