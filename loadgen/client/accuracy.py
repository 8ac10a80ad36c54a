"""workload.dataset: one answer graded against its expected value, once, after the stream.

    PromptSpec.expected (loadgen.scenario.dataset.Expected: kind, value) ─► RequestSpec /
    senders Spec ─► Shape.tally(want_text, expected): the tally keeps the answer's text pieces
    (only then) ─► request.finish ─► grade(...) ─► Record.correct

Rules (docs/metrics.md "Accuracy beside speed"):
  not checkable (None)  the request did not complete (failed, cancelled), or it was cut
                        (finish_reason "length") and what is missing could still change the verdict
  exact                 the answer's text, trimmed of surrounding whitespace, equals the value
  choices               ... equals one of the values
  regex                 re.search(value, answer) finds a match (Python ``re``)
  cut answers           exact / choices: wrong when the text so far can no longer become an
                        accepted answer (it is no prefix of one), else not checkable; regex: not
                        checkable (a later character may make or break a match)
Nothing here runs per chunk: the stamps are long taken when ``grade`` runs.
"""
from __future__ import annotations

import re
from typing import Any, Optional


def _could_become(text: str, target: str) -> bool:
    """Could ``text`` followed by more characters, then trimmed, equal ``target``?"""
    s = text.lstrip()
    if target.startswith(s):
        return True
    return s.startswith(target) and not s[len(target):].strip()


def grade(expected: Any, text: str, status: str, finish_reason: Optional[str]) -> Optional[bool]:
    """``Record.correct`` of one answer (see the module doc)."""
    if expected is None or status != "ok":
        return None
    kind, value = expected[0], expected[1]
    accepted = (value,) if kind == "exact" else tuple(value) if kind == "choices" else None
    if finish_reason == "length":                     # cut by max_tokens
        if accepted is None or any(_could_become(text, a) for a in accepted):
            return None
        return False
    if accepted is not None:
        return text.strip() in {a.strip() for a in accepted}
    return re.search(value, text) is not None
