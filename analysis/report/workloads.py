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

from analysis.report.render import Block, fmt, group_blocks, pair
from analysis.report.served import served_blocks
from analysis.report.structured import structured_blocks



def stage_blocks(s: dict) -> list[Block]:
    st = s.get("stages")
    if not st:
        return []
    rows = [[str(x["index"]), (f"{x['concurrency']} users" if x.get("concurrency")
                               else f"{fmt(x.get('rate'))} /s"), f"{fmt(x['start_s'])}–{fmt(x['start_s'] + x['duration_s'])}",
             str(x["requests"]), str(x["failed"]), fmt(x.get("achieved_send_rate")),
             pair(x, "ttft_from_scheduled_ms"), pair(x, "tpot_ms"), fmt(x.get("itl_ms_p99")),
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
             pair(t, "ttft_ms"), pair(t, "tpot_ms")] for t in se.get("by_turn") or []]
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
              ["TTFT (any token) p50 / p99 ms", pair(s, "ttft_ms")],
              ["reasoning tokens", str(r["reasoning_tokens"])],
              ["answer tokens", str(r["answer_tokens"])],
              ["requests with reasoning", str(r["requests_with_reasoning"])]]),
            ("p", r["rule"])]


def replica_blocks(s: dict) -> list[Block]:
    rp = s.get("replicas")
    if not rp or not rp.get("urls"):
        return []
    return group_blocks("Replicas (target.urls)",
                        "Each replica's requests, balanced by the client; rates over the run's "
                        "window (so they add up to the run's).", "URL",
                        [(u["url"], u) for u in rp["urls"]],
                        rp.get("ttft") == "ttft_from_scheduled_ms")


def probe_blocks(s: dict) -> list[Block]:
    ps = s.get("probe_stream")
    if not ps:
        return []
    a, u, x = ps["alone"], ps["under_load"], ps["slowdown"]

    def row(name: str, key: str, q: str, ratio: str) -> list[str]:
        return [name, fmt(a[key][q]), fmt(u[key][q]), fmt(x.get(ratio)) + "×" if x.get(ratio)
                is not None else "n/a"]
    rows = [row("TTFT p50 ms", "ttft_ms", "p50", "ttft_p50"),
            row("TTFT p99 ms", "ttft_ms", "p99", "ttft_p99"),
            row("TPOT p50 ms", "tpot_ms", "p50", "tpot_p50"),
            row("TPOT p99 ms", "tpot_ms", "p99", "tpot_p99"),
            ["E2E p50 ms", fmt(a["e2el_ms_p50"]), fmt(u["e2el_ms_p50"]),
             fmt(x.get("e2el_p50")) + "×" if x.get("e2el_p50") is not None else "n/a"],
            ["requests (failed)", f"{a['requests']} ({a['failed']})",
             f"{u['requests']} ({u['failed']})", ""]]
    return [("h", "Probe stream (load.probe)"),
            ("p", f"{fmt(ps.get('rate'))} probes/s of {ps.get('prompt_tokens')} prompt + "
                  f"{ps.get('output_tokens')} output tokens beside the main load, against the same "
                  f"probe sent alone first. {ps['rule']}."),
            ("table", ["figure", "alone", "beside the load", "slowdown"], rows)]


def image_blocks(s: dict) -> list[Block]:
    im = s.get("images")
    if not im:
        return []
    shape = (f"{im.get('width')} x {im.get('height')} {im.get('format')}, "
             f"{fmt((im.get('bytes_mean') or 0) / 1024, 0)} KiB each on average, a pool of "
             f"{im.get('pool')}" if im.get("width") else "shape not recorded")
    return [("h", "Images (workload.images)"),
            ("p", f"{im['requests']} requests carried {im['images']} images "
                  f"({fmt(im['per_request'])} per request; {shape}). Usage prompt tokens per "
                  f"request (the server's count, image tokens included): "
                  f"{fmt(im.get('usage_prompt_tokens_mean'))}.")]


def workload_blocks(s: dict) -> list[Block]:
    return (stage_blocks(s) + session_blocks(s) + reasoning_blocks(s) + replica_blocks(s)
            + probe_blocks(s) + image_blocks(s) + structured_blocks(s) + served_blocks(s))
