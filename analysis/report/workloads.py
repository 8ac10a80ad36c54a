"""The report's sections for staged, multi-turn and reasoning runs (summary.json ─► blocks).

    summary["stages"]    ─► one row per stage (rate, window, requests, TTFT/TPOT p50/p99, tok/s)
    summary["sessions"]  ─► sessions, turns, and one row per turn index (the prompt grows)
    summary["reasoning"] ─► time to the first answer token beside TTFT, reasoning vs answer tokens
    summary["replicas"]  ─► one row per target URL (share, failures, TTFT/TPOT, req/s, tok/s)
    summary["probe_stream"] ─► the probe alone vs beside the main load, and the slowdown
    summary["images"]    ─► images per request and their shape (workload.images)
    summary["structured"] ─► tool calls / JSON answers: parsed and valid shares (structured.py)
Nothing when the run had none of them.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.summary import Summary
from analysis.report.render import Block, fmt, group_blocks, pair
from analysis.report.served import served_blocks
from analysis.report.structured import structured_blocks


def stage_blocks(s: Summary) -> list[Block]:
    if not s.stages:
        return []
    rows = [[str(x.index), (f"{x.concurrency} users" if x.concurrency
                            else f"{fmt(x.rate)} /s"),
             f"{fmt(x.start_s)}–{fmt(x.start_s + x.duration_s)}",
             str(x.requests), str(x.failed), fmt(x.achieved_send_rate),
             pair(x.ttft_from_scheduled_ms), pair(x.tpot_ms), fmt(x.itl_ms_p99),
             fmt(x.output_throughput)] for x in s.stages]
    return [("h", "Stages"),
            ("p", "Each stage on its own window: the requests scheduled in it; output tok/s = tokens "
                  "that arrived inside the window / its length."),
            ("table", ["stage", "load", "window s", "requests", "failed", "sent /s",
                       "TTFT sched. p50 / p99 ms", "TPOT p50 / p99 ms", "ITL p99 ms", "output tok/s"],
             rows)]


def session_blocks(s: Summary) -> list[Block]:
    se = s.sessions
    if not se:
        return []
    rows = [[str(t.turn), str(t.requests), fmt(t.prompt_tokens_mean), pair(t.ttft_ms),
             pair(t.tpot_ms)] for t in se.by_turn]
    return [("h", "Sessions by turn"),
            ("p", f"{se.sessions} sessions, {se.turns} turns (mean {fmt(se.turns_per_session_mean)}"
                  f", max {se.turns_per_session_max} per session)."),
            ("table", ["turn", "requests", "prompt tokens (mean)", "TTFT p50 / p99 ms",
                       "TPOT p50 / p99 ms"], rows)]


def reasoning_blocks(s: Summary) -> list[Block]:
    r = s.reasoning
    if not r:
        return []
    return [("h", "Reasoning"),
            ("table", ["figure", "value"],
             [["time to first answer token p50 / p99 ms", pair(r.ttft_answer_ms)],
              ["TTFT (any token) p50 / p99 ms", pair(s.ttft_ms)],
              ["reasoning tokens", str(r.reasoning_tokens)],
              ["answer tokens", str(r.answer_tokens)],
              ["requests with reasoning", str(r.requests_with_reasoning)]]),
            ("p", r.rule)]


def replica_blocks(s: Summary) -> list[Block]:
    rp = s.replicas
    if not rp or not rp.urls:
        return []
    return group_blocks("Replicas (target.urls)",
                        "Each replica's requests, balanced by the client; rates over the run's "
                        "window (so they add up to the run's).", "URL",
                        [(u.url, u) for u in rp.urls], rp.ttft == "ttft_from_scheduled_ms")


def _times(x: Optional[float]) -> str:
    return fmt(x) + "×" if x is not None else "n/a"


def probe_blocks(s: Summary) -> list[Block]:
    ps = s.probe_stream
    if not ps:
        return []
    a, u, x = ps.alone, ps.under_load, ps.slowdown
    rows = [["TTFT p50 ms", fmt(a.ttft_ms.p50), fmt(u.ttft_ms.p50), _times(x.ttft_p50)],
            ["TTFT p99 ms", fmt(a.ttft_ms.p99), fmt(u.ttft_ms.p99), _times(x.ttft_p99)],
            ["TPOT p50 ms", fmt(a.tpot_ms.p50), fmt(u.tpot_ms.p50), _times(x.tpot_p50)],
            ["TPOT p99 ms", fmt(a.tpot_ms.p99), fmt(u.tpot_ms.p99), _times(x.tpot_p99)],
            ["E2E p50 ms", fmt(a.e2el_ms_p50), fmt(u.e2el_ms_p50), _times(x.e2el_p50)],
            ["requests (failed)", f"{a.requests} ({a.failed})", f"{u.requests} ({u.failed})", ""]]
    return [("h", "Probe stream (load.probe)"),
            ("p", f"{fmt(ps.rate)} probes/s of {ps.prompt_tokens} prompt + "
                  f"{ps.output_tokens} output tokens beside the main load, against the same "
                  f"probe sent alone first. {ps.rule}."),
            ("table", ["figure", "alone", "beside the load", "slowdown"], rows)]


def image_blocks(s: Summary) -> list[Block]:
    im = s.images
    if not im:
        return []
    shape = (f"{im.width} x {im.height} {im.format}, "
             f"{fmt((im.bytes_mean or 0) / 1024, 0)} KiB each on average, a pool of "
             f"{im.pool}" if im.width else "shape not recorded")
    return [("h", "Images (workload.images)"),
            ("p", f"{im.requests} requests carried {im.images} images "
                  f"({fmt(im.per_request)} per request; {shape}). Usage prompt tokens per "
                  f"request (the server's count, image tokens included): "
                  f"{fmt(im.usage_prompt_tokens_mean)}.")]


def workload_blocks(s: dict | Summary) -> list[Block]:
    """Every workload section of summary.json (read once, as the typed Summary)."""
    t = Summary.read(s)
    return (stage_blocks(t) + session_blocks(t) + reasoning_blocks(t) + replica_blocks(t)
            + probe_blocks(t) + image_blocks(t) + structured_blocks(t) + served_blocks(t))
