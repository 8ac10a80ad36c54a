"""The report's section for tool calls and structured output (summary.json "structured" ─► blocks).

    summary["structured"]["tools"]            ─► one row: requests, called, calls, parsed / valid
    summary["structured"]["response_format"]  ─► one row: requests, parsed / valid
        beside each group's TTFT and E2E p50 / p99; then up to 3 example problems
Nothing when the run offered no tools and asked for no response_format.
"""
from __future__ import annotations

from typing import Optional

from analysis.report.render import Block, fmt, pair


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{fmt(100 * x)} %"



def structured_blocks(s: dict) -> list[Block]:
    st = s.get("structured")
    if not st:
        return []
    rows, examples = [], []
    for name, label in (("tools", "tools offered"), ("response_format", "response_format")):
        g = st.get(name)
        if not g:
            continue
        called = (f"{g.get('called')} ({_pct(g.get('called_share'))}), {g.get('tool_calls_total')} "
                  "calls" if name == "tools" else "")
        rows.append([label, str(g["requests"]), called, _pct(g.get("parsed_share")),
                     _pct(g.get("valid_share")), pair(g, "ttft_ms"), pair(g, "e2el_ms")])
        examples += [f"{label}: {e}" for e in g.get("invalid_examples") or []]
    out: list[Block] = [
        ("h", "Tool calls and structured output"),
        ("p", "How many requests asked, how many answers parse as JSON (tools: the final call's "
              "arguments) and how many validate against the schema (the tool's parameters, or "
              f"response_format's). Rule: {st.get('rule') or 'n/a'}."),
        ("table", ["requests with", "requests", "answered with a tool call", "parsed", "valid",
                   "TTFT p50 / p99 ms", "E2E p50 / p99 ms"], rows)]
    if examples:
        out.append(("p", "Invalid answers, e.g.: " + "; ".join(examples)))
    return out
