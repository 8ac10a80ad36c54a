"""workload.dataset: one answer graded against its expected value, once, after the stream, off
the sending loop and within a bound.

    PromptSpec.expected (loadgen.scenario.dataset.Expected: kind, value) ─► RequestSpec /
    senders Spec ─► Shape.tally(want_text, expected): the tally keeps the answer's text pieces
    (only then) ─► request.finish: ``grade_now`` (exact / choices: a string compare, done there;
    a regex answer left for ``settle``) ─► the engine's ``settle`` (asyncio: ``settle_async``,
    the one-process run and each --procs child; gevent: ``settle_gevent``, each Locust worker):
    the regex match on a grading thread (RE2 releases the GIL), waited for at most
    ``GRADE_BUDGET_S`` ─► Record.correct ─► the ledger writes the record

Rules (docs/metrics.md "Accuracy beside speed"):
  not checkable (None)  the request did not complete (failed, cancelled), or it was cut
                        (finish_reason "length") and what is missing could still change the verdict,
                        or the answer is longer than MAX_GRADED_CHARS, or its grade ran past
                        GRADE_BUDGET_S (summary.json accuracy.unchecked says which)
  exact                 the answer's text, trimmed of surrounding whitespace, equals the value
  choices               ... equals one of the values
  regex                 RE2 (google-re2: linear time; no backreferences or lookaround, refused
                        when the dataset is read: loadgen.scenario.pattern) finds a match
  cut answers           exact / choices: wrong when the text so far, trimmed, can no longer become
                        an accepted answer (it is no prefix of one, trimmed), else not checkable;
                        regex: not checkable (a later character may make or break a match)
Nothing here runs per chunk, and no match runs on the sending loop.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from loadgen.scenario.pattern import MAX_GRADED_CHARS, compile_pattern

GRADE_BUDGET_S = 2.0          # a regex grade not back by then: correct null (the run goes on)
DEFER = object()              # grade_now: a regex answer, matched by ``settle``


def _could_become(text: str, target: str) -> bool:
    """Could ``text`` followed by more characters, then trimmed, equal ``target`` trimmed?"""
    s, t = text.lstrip(), target.strip()
    if t.startswith(s):
        return True
    return s.startswith(t) and not s[len(t):].strip()


def grade_now(expected: Any, text: str, status: str, finish_reason: Optional[str]):
    """``Record.correct`` when it needs no pattern match (True / False / None), else DEFER."""
    if expected is None or status != "ok" or len(text) > MAX_GRADED_CHARS:
        return None
    kind, value = expected[0], expected[1]
    accepted = (value,) if kind == "exact" else tuple(value) if kind == "choices" else None
    if finish_reason == "length":                     # cut by max_tokens
        if accepted is None or any(_could_become(text, a) for a in accepted):
            return None
        return False
    if accepted is not None:
        return text.strip() in {a.strip() for a in accepted}
    return DEFER


def match(pattern: str, text: str) -> Optional[bool]:
    """The regex verdict (any thread); None when the pattern cannot run (refused at load)."""
    try:
        return compile_pattern(pattern).search(text) is not None
    except ValueError:
        return None


def grade(expected: Any, text: str, status: str, finish_reason: Optional[str]) -> Optional[bool]:
    """``Record.correct`` of one answer, in the caller's thread (see the module doc)."""
    got = grade_now(expected, text, status, finish_reason)
    return match(expected[1], text) if got is DEFER else got


_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loadgen-grade")
        return _pool


def pending(rec, tally: Any):
    """(pattern, text) when this answer's grade is a regex match ``request.finish`` left to
    ``settle`` (the tally still holds the text); else None."""
    expected = getattr(tally, "expected", None)
    if expected is None or expected[0] != "regex" or rec.correct is not None:
        return None
    text = "".join(getattr(tally, "text", None) or ())
    if grade_now(expected, text, rec.status, rec.finish_reason) is not DEFER:
        return None
    return expected[1], text


async def settle_async(rec, tally) -> None:
    """asyncio engines: the deferred regex grade on the grading thread, at most GRADE_BUDGET_S
    (the sending loop runs meanwhile); past it ``correct`` stays None."""
    job = pending(rec, tally)
    if job is None:
        return
    import asyncio
    fut = asyncio.get_running_loop().run_in_executor(_executor(), match, *job)
    try:
        rec.correct = await asyncio.wait_for(fut, GRADE_BUDGET_S)
    except asyncio.TimeoutError:
        rec.correct = None


def settle_gevent(rec, tally) -> None:
    """gevent engines (Locust workers): the same on gevent's native thread pool; this greenlet
    waits, the others run."""
    job = pending(rec, tally)
    if job is None:
        return
    import gevent
    res = gevent.get_hub().threadpool.spawn(match, *job)
    res.wait(GRADE_BUDGET_S)
    rec.correct = res.value if res.ready() and res.successful() else None
