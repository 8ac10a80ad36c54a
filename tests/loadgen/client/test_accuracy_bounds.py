"""The grade off the sending loop and within a bound (loadgen.client.accuracy,
loadgen.scenario.pattern): a backtracking pattern is refused when the dataset is read (FILE:LINE,
exit 2) or, if it got in, matched by RE2 in linear time on the grading thread; an answer longer
than MAX_GRADED_CHARS is not graded and summary.json counts it as over_budget; a cut answer is
compared with its trimmed target."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from analysis.metrics import accuracy as summary_accuracy
from loadgen.client import accuracy
from loadgen.client.accuracy import grade
from loadgen.scenario import limits
from loadgen.scenario.dataset import read_dataset_file
from loadgen.scenario.strict import ScenarioError
from tests.loadgen.client.tallies import finished

ROOT = Path(__file__).resolve().parents[3]
EVIL = "(a+)+b"


def _rows(tmp_path, *rows) -> Path:
    p = tmp_path / "set.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


@pytest.mark.parametrize("pattern,needle", [
    (r"(a)\1", "set.jsonl:2: expected.regex: not a pattern RE2 can match in linear time"),
    (r"a(?=b)", "set.jsonl:2: expected.regex: not a pattern RE2 can match in linear time"),
    ("a" * 1001, "set.jsonl:2: expected.regex: longer than 1,000 characters"),
])
def test_a_pattern_that_cannot_be_bounded_is_refused_naming_file_and_line(tmp_path, pattern,
                                                                          needle):
    p = _rows(tmp_path, {"prompt": "x", "expected": {"exact": "1"}},
              {"prompt": "say a", "expected": {"regex": pattern}})
    with pytest.raises(ScenarioError) as e:
        read_dataset_file(str(p))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_the_cli_refuses_a_backreference_with_one_line_and_exit_2(tmp_path):
    p = _rows(tmp_path, {"prompt": "say a", "expected": {"regex": r"(a)\1"}})
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "run", "scenarios/accuracy.yaml",
                        "--set", "target.url=http://127.0.0.1:9",
                        "--set", f"workload.dataset={{path: {p}}}",
                        "--set", f"output.dir={tmp_path}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "set.jsonl:1: expected.regex:" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_backtracking_pattern_is_linear_under_re2():
    # Python's re takes ~2**n steps here; RE2 is linear (a deterministic count, not a clock:
    # the answer is decided, and the pattern is accepted at load)
    text = "a" * 31
    assert accuracy.compile_pattern(EVIL) is not None
    assert grade(("regex", EVIL), text, "ok", "stop") is False
    assert grade(("regex", EVIL), text + "b", "ok", "stop") is True


def test_an_answer_longer_than_the_bound_is_not_graded_and_counted_over_budget():
    long = "x" * (limits.MAX_GRADED_CHARS + 1)
    assert grade(("exact", "x"), long, "ok", "stop") is None
    assert grade(("regex", "x"), long, "ok", "stop") is None
    recs = [{"phase": "measured", "status": "ok", "finish_reason": "stop", "correct": None,
             "output_chars": len(long)},
            {"phase": "measured", "status": "ok", "finish_reason": "stop", "correct": True,
             "output_chars": 1}]
    a = summary_accuracy.accuracy_block(recs, {"accuracy": {"dataset": "d", "rule": "r"}})
    assert a["n"] == 1 and a["unchecked"]["over_budget"] == 1
    assert summary_accuracy.MAX_GRADED_CHARS == limits.MAX_GRADED_CHARS   # one bound, two sides


@pytest.mark.parametrize("text,want", [("4", None), (" 4", None), ("5", False), ("42", True)])
def test_a_cut_answer_is_compared_with_the_trimmed_target(text, want):
    # expected.exact " 42", cut at max_tokens after "4": it could still become 42 (item 10)
    fr = "stop" if want is True else "length"
    assert grade(("exact", " 42"), text, "ok", fr) is want


CHUNKS = [b'{"choices":[{"index":0,"delta":{"content":"aaaa"}}]}',
          b'{"choices":[{"index":0,"delta":{"content":"ab"},"finish_reason":"stop"}]}']


def _finished(expected):
    return finished(CHUNKS, expected)


def test_finish_leaves_a_regex_match_to_the_grading_thread():
    rec, tally = _finished(("regex", EVIL))
    assert rec.correct is None and accuracy.pending(rec, tally) == (EVIL, "aaaaab")
    seen = {}

    def spy(pattern, text, _match=accuracy.match):
        seen["thread"] = threading.current_thread().name
        return _match(pattern, text)

    async def main():
        loop_thread = threading.current_thread().name
        orig, accuracy.match = accuracy.match, spy
        try:
            await accuracy.settle_async(rec, tally)
        finally:
            accuracy.match = orig
        return loop_thread

    loop_thread = asyncio.run(main())
    assert rec.correct is True and seen["thread"] != loop_thread
    assert seen["thread"].startswith("loadgen-grade")
    assert accuracy.pending(rec, tally) is None          # graded once


def test_exact_answers_are_graded_in_finish_without_a_thread():
    rec, tally = _finished(("exact", "aaaaab"))
    assert rec.correct is True and accuracy.pending(rec, tally) is None
