"""The report's sections on what the server did with the run's requests (summary.json ─► blocks).

    summary["models"]      ─► one row per model / LoRA adapter (api.models): share, failures,
                              TTFT/TPOT, ITL p99, req/s, output tok/s, goodput
    summary["spec_decode"] ─► the server's draft acceptance (counters over the window, per
                              position) and the client's tokens per chunk, ITL per token vs per chunk
Nothing when the run had none of them (one model; no spec-decode counters and single-token chunks).
"""
from __future__ import annotations

from analysis.report.render import Block, fmt, pair


def model_blocks(s: dict) -> list[Block]:
    ms = s.get("models")
    if not ms:
        return []
    sched = s.get("headline_ttft") == "ttft_from_scheduled_ms"
    rows = [[name, str(u["requests"]), fmt(100 * u["share"]) + " %" if u.get("share") is not None
             else "n/a", str(u["failed"]), pair(u, "ttft_ms"), pair(u, "tpot_ms"),
             fmt(u.get("itl_ms_p99")), fmt(u.get("request_throughput")),
             fmt(u.get("output_throughput")), fmt(u.get("goodput"))] for name, u in ms.items()]
    return [("h", "Models (api.models)"),
            ("p", "Each model's (or LoRA adapter's) measured requests, as api.model_assignment "
                  "dealt them; rates over the run's window (so they add up to the run's)."),
            ("table", ["model", "requests", "share", "failed",
                       f"TTFT{' sched.' if sched else ''} p50 / p99 ms", "TPOT p50 / p99 ms",
                       "ITL p99 ms", "req/s", "output tok/s", "goodput req/s"], rows)]


def spec_blocks(s: dict) -> list[Block]:
    sd = s.get("spec_decode")
    if not sd:
        return []
    c = sd.get("client") or {}
    bursty = c.get("status") == "measured" and (c.get("multi_token_chunk_share") or 0) > 0
    if sd.get("status") != "measured" and not bursty:
        return []
    out: list[Block] = [("h", "Speculative decoding and bursts")]
    if sd.get("status") == "measured":
        rows = [["draft tokens", str(sd.get("draft_tokens"))],
                ["accepted tokens", str(sd.get("accepted_tokens"))],
                ["acceptance rate", fmt(sd.get("acceptance_rate"))],
                ["mean acceptance length (tokens per step)", fmt(sd.get("mean_acceptance_length"))]]
        rows += [[f"accepted at position {p['position']} (per draft)", fmt(p.get("acceptance_rate"))]
                 for p in sd.get("per_position") or []]
        out += [("p", "The server's counters (vllm:spec_decode_*) over the measured window."
                 + (f" {sd['reason']}." if sd.get("reason") else "")),
                ("table", ["server figure", "value"], rows)]
    else:
        out.append(("p", f"Server: {sd.get('reason')}."))
    if c.get("status") == "measured":
        tpc, pt, pc = c["tokens_per_chunk"], c.get("itl_ms_per_token") or {}, c.get("itl_ms_per_chunk") or {}
        out += [("p", f"Client: {fmt(tpc.get('mean'))} tokens per content chunk on average (max "
                      f"{fmt(tpc.get('max'), 0)}); {fmt(100 * c['multi_token_chunk_share'])} % of the "
                      f"chunks carried several tokens ({fmt(100 * c['tokens_in_bursts_share'])} % of "
                      "the tokens). Tokens per chunk: "
                      + ", ".join(f"{k}: {v}" for k, v in (c.get("histogram") or {}).items()) + "."),
                ("table", ["ITL", "p50 ms", "p99 ms", "mean ms", "count"],
                 [["per token (itl_ms)", fmt(pt.get("p50")), fmt(pt.get("p99")), fmt(pt.get("mean")),
                   str(pt.get("count"))],
                  ["per chunk (chunk_gap_ms)", fmt(pc.get("p50")), fmt(pc.get("p99")), fmt(pc.get("mean")),
                   str(pc.get("count"))]])]
    return out


def served_blocks(s: dict) -> list[Block]:
    return model_blocks(s) + spec_blocks(s)
