"""expected.regex (workload.dataset): the one regex engine, RE2, and its bounds.

    dataset row's expected.regex ─► compile_pattern (when the file is read: a pattern RE2
    cannot match in linear time, e.g. a backreference or lookaround, or one longer than
    MAX_REGEX_CHARS, is a ScenarioError naming FILE:LINE) ─► ... ─► loadgen.client.accuracy
    (the same cached compile on the grading thread; the answer at most MAX_GRADED_CHARS long)

RE2 (google-re2) matches in time linear in the text, whatever the pattern: "(a+)+b" against 31
"a"s is microseconds, where Python's ``re`` backtracks for seconds. Its memory for one pattern
(the compiled program and its DFA cache) is capped at RE2_MAX_MEM. Pure; RE2 releases the GIL
while it matches, so a grading thread does not hold up the sending loop.
"""
from __future__ import annotations

import functools

import re2

from loadgen.scenario.limits import MAX_GRADED_CHARS

__all__ = ["compile_pattern", "MAX_REGEX_CHARS", "MAX_GRADED_CHARS", "RE2_MAX_MEM"]

MAX_REGEX_CHARS = 1_000       # expected.regex: pattern length (a match is O(pattern × text))
RE2_MAX_MEM = 8 << 20         # RE2's memory for one compiled pattern, its DFA cache included

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False   # RE2 would print each refused pattern to stderr
_OPTIONS.max_mem = RE2_MAX_MEM


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str):
    """The compiled RE2 pattern; ValueError (one line) when it is too long or RE2 cannot run
    it in linear time (backreferences, lookaround, ...)."""
    if len(pattern) > MAX_REGEX_CHARS:
        raise ValueError(f"longer than {MAX_REGEX_CHARS:,} characters")
    try:
        return re2.compile(pattern, _OPTIONS)
    except Exception as e:               # re2.error: a bytes message
        why = e.args[0] if e.args else e
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise ValueError(f"not a pattern RE2 can match in linear time ({why}; backreferences "
                         "and lookaround are not supported)") from None
