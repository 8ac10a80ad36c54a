"""The report's sections for staged, multi-turn and reasoning runs (summary.json ─► blocks).

    summary["stages"]    ─► one row per stage (rate, window, requests, TTFT/TPOT p50/p99, tok/s)
    summary["sessions"]  ─► sessions, turns, and one row per turn index (the prompt grows)
    summary["reasoning"] ─► time to the first answer token beside TTFT, reasoning vs answer tokens
Nothing when the run had none of them.
"""
from __future__ import annotations

from analysis.report.render import Block, fmt


def _pair(d: dict, key: str) -> str:
    v = d.get(key) or {}
    return f"{fmt(v.get('p50'))} / {fmt(v.get('p99'))}"


def stage_blocks(s: dict) -> list[Block]:
    st = s.get("stages")
    if not st:
        return []
    rows = [[str(x["index"]), (f"{x['concurrency']} users" if x.get("concurrency")
                               else f"{fmt(x.get('rate'))} /s"), f"{fmt(x['start_s'])}–{fmt(x['start_s'] + x['duration_s'])}",
             str(x["requests"]), str(x["failed"]), fmt(x.get("achieved_send_rate")),
             _pair(x, "ttft_from_scheduled_ms"), _pair(x, "tpot_ms"), fmt(x.get("itl_ms_p99")),
             fmt(x.get("output_throughput"))] for x in st]
    return [("h", "Stages"),
            ("p", "Each stage on its own window: the requests scheduled in it; output tok/s = tokens "
                  "that arrived inside the window / its length."),
            ("table", ["stage", "load", "window s", "requests", "failed", "sent /s",
                       "TTFT sched. p50 / p99 ms", "TPOT p50 / p99 ms", "ITL p99 ms", "output tok/s"],
             rows)]


def session_blocks(s: dict) -> list[Block]:
    se = s.get("sessions")
    if not se:
        return []
    rows = [[str(t["turn"]), str(t["requests"]), fmt(t.get("prompt_tokens_mean")),
             _pair(t, "ttft_ms"), _pair(t, "tpot_ms")] for t in se.get("by_turn") or []]
    return [("h", "Sessions by turn"),
            ("p", f"{se['sessions']} sessions, {se['turns']} turns (mean {fmt(se['turns_per_session_mean'])}"
                  f", max {se['turns_per_session_max']} per session)."),
            ("table", ["turn", "requests", "prompt tokens (mean)", "TTFT p50 / p99 ms",
                       "TPOT p50 / p99 ms"], rows)]


def reasoning_blocks(s: dict) -> list[Block]:
    r = s.get("reasoning")
    if not r:
        return []
    t = r["ttft_answer_ms"]
    return [("h", "Reasoning"),
            ("table", ["figure", "value"],
             [["time to first answer token p50 / p99 ms", f"{fmt(t.get('p50'))} / {fmt(t.get('p99'))}"],
              ["TTFT (any token) p50 / p99 ms", _pair(s, "ttft_ms")],
              ["reasoning tokens", str(r["reasoning_tokens"])],
              ["answer tokens", str(r["answer_tokens"])],
              ["requests with reasoning", str(r["requests_with_reasoning"])]]),
            ("p", r["rule"])]


def workload_blocks(s: dict) -> list[Block]:
    return stage_blocks(s) + session_blocks(s) + reasoning_blocks(s)
