"""The report's section for tool calls and structured output (summary.json "structured" ─► blocks).

    summary["structured"]["tools"]            ─► one row: requests, called, calls, parsed / valid
    summary["structured"]["response_format"]  ─► one row: requests, parsed / valid
        beside each group's TTFT and E2E p50 / p99; then up to 3 example problems
Nothing when the run offered no tools and asked for no response_format.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.summary import Summary
from analysis.report.render import Block, fmt, pair


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{fmt(100 * x)} %"



def structured_blocks(s: dict | Summary) -> list[Block]:
    st = Summary.read(s).structured
    if not st:
        return []
    rows, examples = [], []
    for g, name, label in ((st.tools, "tools", "tools offered"),
                           (st.response_format, "response_format", "response_format")):
        if not g:
            continue
        called = (f"{g.called} ({_pct(g.called_share)}), {g.tool_calls_total} "
                  "calls" if name == "tools" else "")
        rows.append([label, str(g.requests), called, _pct(g.parsed_share),
                     _pct(g.valid_share), pair(g.ttft_ms), pair(g.e2el_ms)])
        examples += [f"{label}: {e}" for e in g.invalid_examples]
    out: list[Block] = [
        ("h", "Tool calls and structured output"),
        ("p", "How many requests asked, how many answers parse as JSON (tools: the final call's "
              "arguments) and how many validate against the schema (the tool's parameters, or "
              f"response_format's). Rule: {st.rule or 'n/a'}."),
        ("table", ["requests with", "requests", "answered with a tool call", "parsed", "valid",
                   "TTFT p50 / p99 ms", "E2E p50 / p99 ms"], rows)]
    if examples:
        out.append(("p", "Invalid answers, e.g.: " + "; ".join(examples)))
    return out
