"""analysis/metrics/structured.py: parsed / valid shares of tool calls and JSON answers, from
hand-written records; None (never 0) where nothing was asked or checked; the report's section."""
from __future__ import annotations

import pytest

from analysis.contract import Summary
from analysis.metrics.structured import share, structured_block
from analysis.report.structured import structured_blocks

MS = 1_000_000


def rec(i, status="ok", phase="measured", **kw):
    r = {"id": i, "phase": phase, "status": status, "sent_at_ns": 0,
         "chunks": [[10 * MS * (i + 1), 1], [20 * MS * (i + 1), 1]], "end_at_ns": 30 * MS * (i + 1)}
    r.update(kw)
    return r


def test_a_run_without_tools_or_response_format_has_no_block():
    assert structured_block([rec(0), rec(1)]) is None
    assert structured_block([]) is None
    assert structured_blocks({"structured": None}) == []


def test_tool_call_shares_over_completed_measured_requests():
    recs = [rec(0, tool_calls=1, tool_args_parsed=True, tool_args_valid=True),
            rec(1, tool_calls=2, tool_args_parsed=True, tool_args_valid=False,
                structured_error="get_weather arguments: 'city' is a required property"),
            rec(2, tool_calls=1, tool_args_parsed=False, tool_args_valid=False,
                structured_error="not JSON"),
            rec(3, tool_calls=0),                                   # offered, answered in text
            rec(4, status="error", tool_calls=0),                   # failed: not counted
            rec(5, phase="warmup", tool_calls=1, tool_args_parsed=False, tool_args_valid=False)]
    b = structured_block(recs)
    t = b["tools"]
    assert b["response_format"] is None
    assert (t["requests"], t["called"], t["tool_calls_total"]) == (4, 3, 4)
    assert t["called_share"] == pytest.approx(3 / 4)
    assert t["parsed_share"] == pytest.approx(2 / 3) and t["valid_share"] == pytest.approx(1 / 3)
    assert t["checked"] == 3
    assert t["ttft_ms"]["p50"] == pytest.approx(25.0)           # ids 0-3: 10, 20, 30, 40 ms
    assert t["e2el_ms"]["p99"] == pytest.approx(119.1)
    assert t["invalid_examples"] == ["get_weather arguments: 'city' is a required property",
                                     "not JSON"]
    Summary.model_validate({"structured": b})                  # the contract reads it


def test_valid_share_is_none_when_no_call_was_checked_against_a_schema():
    # a Locust user without the tools' schemas: parsed is known, valid is not
    b = structured_block([rec(0, tool_calls=1, tool_args_parsed=True),
                          rec(1, tool_calls=1, tool_args_parsed=False)])
    assert b["tools"]["parsed_share"] == 0.5
    assert b["tools"]["valid_share"] is None and b["tools"]["checked"] == 0
    nocall = structured_block([rec(0, tool_calls=0)])["tools"]
    assert nocall["called_share"] == 0 and nocall["parsed_share"] is None


def test_response_format_shares_and_the_report_rows():
    recs = [rec(0, json_parsed=True, json_valid=True),
            rec(1, json_parsed=True, json_valid=False, structured_error="answer: 42 is not of type 'string'"),
            rec(2, json_parsed=False, json_valid=False, structured_error="not JSON"),
            rec(3, json_parsed=True, json_valid=True)]
    b = structured_block(recs)
    g = b["response_format"]
    assert b["tools"] is None and g["requests"] == 4
    assert (g["parsed_share"], g["valid_share"]) == (0.75, 0.5)
    blocks = structured_blocks({"structured": b})
    (table,) = [x for x in blocks if x[0] == "table"]
    assert table[2] == [["response_format", "4", "", "75.00 %", "50.00 %",
                         table[2][0][5], table[2][0][6]]]
    assert any(x[0] == "p" and "not JSON" in x[1] for x in blocks)


def test_share_ignores_unset_values():
    assert share([{"a": True}, {"a": None}, {}], "a") == 1.0
    assert share([{"a": None}], "a") is None
