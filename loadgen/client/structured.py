"""Tool calls and JSON answers, checked once per request after its stream ended.

    base body (tools, response_format: loadgen.scenario.structured.body_fields)
        ─► Checker (once per client: one compiled jsonschema validator per schema)
    StreamTally (calls: [id, name, [argument pieces]]; text pieces when the answer's JSON is checked)
        ─► request.finish ─► fill(rec, tally) ─► Record.tool_calls, tool_args_parsed,
           tool_args_valid, json_parsed, json_valid, structured_error

Rules (docs/metrics.md "Tool calls and structured output"):
  tool_calls         calls seen in the answer (distinct ids / indexes); 0 when tools were offered
                     and none came; None when the request offered none and none came
  tool_args_parsed   the FINAL call's arguments (its pieces joined) parse as JSON
  tool_args_valid    ... and validate against that tool's ``parameters`` (no parameters: any
                     JSON object); False for a name not among the tools; None when the client
                     does not know the tools (a tally built without a Checker)
  json_parsed        response_format: the answer's text parses as JSON (None: no response_format,
                     or the answer was a tool call with no text)
  json_valid         ... and validates against json_schema.schema (json_object: is an object)
  structured_error   the first problem, one line (≤ 200 characters)
An answer past kept.MAX_KEPT_CHARS (text and tool calls kept, kept.py) is not checked: parsed and
valid stay None, tool_calls counts the kept calls and those past the bound, structured_error says so.
Nothing here runs per chunk; the stamps are long taken when ``fill`` runs.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from loadgen.client.kept import MAX_KEPT_CHARS

ERROR_CHARS = 200


def _validator(schema: Optional[dict]):
    """A compiled validator for ``schema`` (its draft, 2020-12 when it names none); None: any object."""
    if schema is None:
        return None
    from jsonschema import validators            # lazy: runs without tools never import it
    return validators.validator_for(schema)(schema)


def _problem(validator, obj: Any) -> Optional[str]:
    """None when ``obj`` is valid, else the most relevant error as one line."""
    if validator is None:
        return None if isinstance(obj, dict) else f"not a JSON object ({type(obj).__name__})"
    if validator.is_valid(obj):
        return None
    from jsonschema.exceptions import best_match
    e = best_match(validator.iter_errors(obj))
    where = "/".join(str(p) for p in e.absolute_path)
    return f"{where + ': ' if where else ''}{e.message}"


class Checker:
    """What a request asked for (from its base body) and how to check the answer."""

    __slots__ = ("tools", "offers_tools", "wants_text", "answer")

    def __init__(self, body: dict):
        self.tools: dict = {}
        for t in body.get("tools") or ():
            fn = t.get("function") or {}
            if fn.get("name"):
                self.tools[fn["name"]] = _validator(fn.get("parameters"))
        self.offers_tools = bool(self.tools)
        rf = body.get("response_format")
        self.wants_text = isinstance(rf, dict) and rf.get("type") in ("json_object", "json_schema")
        self.answer = None
        if self.wants_text and rf.get("type") == "json_schema":
            self.answer = _validator((rf.get("json_schema") or {}).get("schema"))

    @classmethod
    def of(cls, body: dict) -> Optional["Checker"]:
        """A Checker when the body offers tools or asks for a JSON answer, else None."""
        c = cls(body)
        return c if c.offers_tools or c.wants_text else None


def _parse(text: str) -> tuple[bool, Any, Optional[str]]:
    try:
        return True, json.loads(text), None
    except ValueError as e:
        return False, None, f"not JSON ({str(e)[:80]}): {text[:60]!r}"


def fill(rec: Any, tally: Any) -> None:
    """The structured fields of ``rec`` from a finished ``tally`` (see the module doc)."""
    check: Optional[Checker] = getattr(tally, "check", None)
    calls = getattr(tally, "calls", None)
    problem = None
    kept = getattr(tally, "kept", None)
    if kept is not None and kept.cut:           # past kept.MAX_KEPT_CHARS: not checked
        over = getattr(tally, "calls_over", 0)
        if calls or over or (check is not None and check.offers_tools):
            rec.tool_calls = len(calls or ()) + over
        rec.structured_error = (f"the answer's text and tool calls passed {MAX_KEPT_CHARS:,} "
                                "characters (the client keeps no more): not checked")
        return
    if calls:
        rec.tool_calls = len(calls)
        _, name, pieces = calls[-1]
        ok, obj, problem = _parse("".join(pieces))
        rec.tool_args_parsed = ok
        if check is not None:
            if name not in check.tools:
                rec.tool_args_valid = False
                problem = problem or f"tool call to {name!r}, not one of the tools offered"
            elif not ok:
                rec.tool_args_valid = False
            else:
                problem = _problem(check.tools[name], obj)
                rec.tool_args_valid = problem is None
                if problem:
                    problem = f"{name} arguments: {problem}"
    elif check is not None and check.offers_tools:
        rec.tool_calls = 0
    if check is not None and check.wants_text:
        text = "".join(tally.text or ())
        if text or not calls:
            ok, obj, why = _parse(text)
            rec.json_parsed = ok
            if ok:
                why = _problem(check.answer, obj)
            rec.json_valid = why is None
            problem = problem or why
    if problem:
        rec.structured_error = problem.replace("\n", " ")[:ERROR_CHARS]
