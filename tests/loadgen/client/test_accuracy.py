"""loadgen.client.accuracy.grade: exact / regex / choices, not checkable when failed or cut while
the answer could still become right; and request.finish grades once after the stream without
touching any other field of the record."""
import json

import pytest

from loadgen.client.accuracy import grade
from tests.loadgen.client.tallies import finished

EXACT = ("exact", "1665")


@pytest.mark.parametrize("expected,text,status,finish_reason,want", [
    (EXACT, "1665", "ok", "stop", True),
    (EXACT, "  1665\n", "ok", "stop", True),
    (EXACT, "1666", "ok", "stop", False),
    (EXACT, "1665 apples", "ok", "stop", False),
    (EXACT, "1665", "error", None, None),                 # failed: not checkable
    (EXACT, "1665", "cancelled", None, None),
    (EXACT, "16", "ok", "length", None),                  # cut, could still be right
    (EXACT, " 1665", "ok", "length", None),               # cut right at the end: could go on
    (EXACT, "1665 ", "ok", "length", None),
    (EXACT, "17", "ok", "length", False),                 # cut, can no longer be right
    (EXACT, "1665x", "ok", "length", False),
    (EXACT, "", "ok", "length", None),
    (("regex", r"\b1665\b"), "it is 1665.", "ok", "stop", True),
    (("regex", r"\b1665\b"), "it is 16650", "ok", "stop", False),
    (("regex", r"1665"), "1665", "ok", "length", None),   # a cut regex answer: never decided
    (("choices", ("yes", "no")), " no ", "ok", "stop", True),
    (("choices", ("yes", "no")), "maybe", "ok", "stop", False),
    (("choices", ("yes", "no")), "ye", "ok", "length", None),
    (("choices", ("yes", "no")), "x", "ok", "length", False),
])
def test_grade(expected, text, status, finish_reason, want):
    assert grade(expected, text, status, finish_reason) is want


CHUNKS = [b'{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
          b'{"choices":[{"index":0,"delta":{"content":"16"}}]}',
          b'{"choices":[{"index":0,"delta":{"content":"65"},"finish_reason":"stop"}]}',
          b'{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}']


def _run(expected):
    return finished(CHUNKS, expected)[0]


@pytest.mark.parametrize("expected,correct", [(EXACT, True), (("exact", "1666"), False)])
def test_finish_grades_once_and_changes_no_other_field(expected, correct):
    checked, plain = _run(expected), _run(None)
    assert checked.correct is correct and plain.correct is None
    a, b = json.loads(checked.to_json()), json.loads(plain.to_json())
    a.pop("correct"), b.pop("correct")
    assert a == b and a["output_text"] is None      # the text is graded, not kept in the record
