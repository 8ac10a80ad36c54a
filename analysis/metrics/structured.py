"""Tool calls and structured output (``workload.tools``, ``api.response_format``), as pure
functions of records.

    records' tool_calls, tool_args_parsed, tool_args_valid, json_parsed, json_valid
        ─► structured_block() ─► {"tools": {...} | None, "response_format": {...} | None, "rule"}
    per group, over COMPLETED measured requests that asked for it:
        requests            how many (tools: ``tool_calls`` set; response_format: ``json_parsed`` set)
        called, called_share    tools: requests whose answer held at least one tool call
        tool_calls_total        tools: calls seen over those requests
        parsed_share        share of the checked answers (tools: of those with a call) that parse
                            as JSON
        valid_share         share of them that validate against the schema (None when no answer
                            was checked against one: e.g. a Locust run without the tools' schemas)
        ttft_ms, e2el_ms    p50 / p99 of those requests (the first tool-call delta is a first token)
        invalid_examples    up to 3 distinct ``structured_error`` lines

None (never 0) where the data is missing: a share without requests, a group nobody asked for,
the whole block for a run without tools or response_format.
"""
from __future__ import annotations

from typing import Optional

from analysis.metrics import figures as m
from analysis.contract.record import Record
from analysis.contract.records import Records, as_records

RULE = ("completed measured requests; a tool call's arguments and a JSON answer are checked once, "
        "after the stream (jsonschema); the first tool-call delta counts as the first token")


def share(recs: list, key: str) -> Optional[float]:
    """The share of ``recs`` whose ``key`` is True, among those where it is set; None when none is."""
    got = m.field(recs, key) if not recs or isinstance(recs[0], Record) else \
        [r.get(key) for r in recs]                   # any dicts (a block's rows)
    vals = [v for v in got if v is not None]
    return sum(map(bool, vals)) / len(vals) if vals else None


def _latencies(recs: Records) -> dict:
    def pq(f):
        vals = [f(r) for r in recs]
        return {"p50": m.percentile(vals, 50), "p99": m.percentile(vals, 99)}
    return {"ttft_ms": pq(m.ttft_ms), "e2el_ms": pq(m.e2el_ms)}


def _examples(recs: Records) -> list[str]:
    out: list[str] = []
    for r in recs:
        e = r.structured_error
        if e and e not in out:
            out.append(e)
            if len(out) == 3:
                break
    return out


def _having(recs: list, key: str) -> list:
    """The records whose ``key`` is not None (none: found at C speed, the usual run)."""
    vals = m.field(recs, key)
    if vals.count(None) == len(vals):
        return []
    return [r for r, v in zip(recs, vals) if v is not None]


def tools_group(done: Records) -> Optional[dict]:
    done = as_records(done)
    recs = _having(done, "tool_calls")
    if not recs:
        return None
    called = [r for r in recs if r.tool_calls > 0]
    return {"requests": len(recs), "called": len(called),
            "called_share": len(called) / len(recs),
            "tool_calls_total": sum(r.tool_calls for r in recs),
            "parsed_share": share(called, "tool_args_parsed"),
            "valid_share": share(called, "tool_args_valid"),
            "checked": sum(r.tool_args_valid is not None for r in called),
            **_latencies(recs),
            "invalid_examples": _examples([r for r in called if r.tool_args_valid is False])}


def response_format_group(done: Records) -> Optional[dict]:
    done = as_records(done)
    recs = _having(done, "json_parsed")
    if not recs:
        return None
    return {"requests": len(recs), "parsed_share": share(recs, "json_parsed"),
            "valid_share": share(recs, "json_valid"),
            "checked": sum(r.json_valid is not None for r in recs),
            **_latencies(recs),
            "invalid_examples": _examples([r for r in recs if r.json_valid is False])}


def structured_block(records: Records) -> Optional[dict]:
    """summary.json's "structured", or None when no completed measured request asked for tools
    or a response_format."""
    done = m.completed(m.measured(records))
    tools, rf = tools_group(done), response_format_group(done)
    if tools is None and rf is None:
        return None
    return {"tools": tools, "response_format": rf, "rule": RULE}
