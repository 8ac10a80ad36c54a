"""The report's sections on what the server did with the run's requests (summary.json ─► blocks).

    summary["models"]      ─► one row per model / LoRA adapter (api.models): share, failures,
                              TTFT/TPOT, ITL p99, req/s, output tok/s, goodput
    summary["spec_decode"] ─► the server's draft acceptance (counters over the window, per
                              position) and the client's tokens per chunk, ITL per token vs per chunk
    summary["prefix_cache"] ─► prefix_blocks: the server's hit rate, the cached share of the prompt
                              tokens, TTFT p50 of hits vs misses (with the prompt lengths behind them)
    the console (loadgen.run.progress) ─► prefix_line, spec_line: the same figures in one line each
Nothing when the run had none of them (one model; no spec-decode counters and single-token chunks;
a prefix cache that said nothing in a run whose workload asked for no shared prefix). A figure
that is missing is written "n/a: REASON", never 0.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from analysis.contract.base import ContractError
from analysis.contract.meta import RunMeta
from analysis.report.render import Block, fmt, group_blocks, missing


def model_blocks(s: dict) -> list[Block]:
    ms = s.get("models")
    if not ms:
        return []
    return group_blocks("Models (api.models)",
                        "Each model's (or LoRA adapter's) measured requests, as "
                        "api.model_assignment dealt them; rates over the run's window (so they "
                        "add up to the run's).", "model", list(ms.items()),
                        s.get("headline_ttft") == "ttft_from_scheduled_ms")


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


def prefix_asked(meta: Optional[dict]) -> bool:
    """Whether the run's workload asked for shared prompt prefixes (meta.json workload: prefix
    groups, shared_prefix_tokens, or a trace whose prompts share hash_id blocks): then the prefix
    cache's figures are shown even when null."""
    w = (meta or {}).get("workload") or {}
    blocks = ((w.get("trace") or {}).get("distinct_blocks") or 0) > 0
    return bool(w.get("prefix") or w.get("shared_prefix_tokens") or blocks)


def run_meta(run_dir) -> dict:
    """meta.json of a run directory, read through the contract (analysis.contract.meta.RunMeta),
    as a dict; {} when absent or unreadable (the console's view)."""
    try:
        return RunMeta.read_file(Path(run_dir) / "meta.json").as_dict()
    except (OSError, ValueError, TypeError, ContractError):
        return {}


def _prefix_cache(s: dict, meta: Optional[dict]) -> Optional[dict]:
    """summary["prefix_cache"] when there is something to say: the server reported (its hit rate,
    or cached_tokens in any answer) or the workload asked for shared prefixes."""
    pc = s.get("prefix_cache")
    if not isinstance(pc, dict):
        return None
    reported = pc.get("server_hit_rate") is not None or (pc.get("requests_hit") or 0) + (
        pc.get("requests_miss") or 0) > 0
    return pc if reported or prefix_asked(meta) else None


def _pct(pc: dict, key: str) -> str:
    v = pc.get(key)
    return f"{100 * v:.1f} %" if v is not None else missing((pc.get("reasons") or {}).get(key))


def _ms(pc: dict, key: str) -> str:
    v = pc.get(key)
    return f"{v:.2f} ms" if v is not None else missing((pc.get("reasons") or {}).get(key))


def prefix_blocks(s: dict, meta: Optional[dict] = None) -> list[Block]:
    pc = _prefix_cache(s, meta)
    if pc is None:
        return []
    rows = [["server hit rate (prompt tokens hit / queried)", _pct(pc, "server_hit_rate"),
             "measured (server's /metrics counters over the window)"],
            ["cached share of the prompt tokens", _pct(pc, "cached_prompt_fraction"),
             "measured (usage.prompt_tokens_details.cached_tokens)"],
            ["TTFT p50 of hits (cached_tokens > 0)", _ms(pc, "ttft_ms_p50_hit"),
             f"measured ({pc.get('requests_hit')} requests, prompt mean "
             f"{fmt(pc.get('prompt_tokens_mean_hit'), 1)} tokens)"],
            ["TTFT p50 of misses (cached_tokens == 0)", _ms(pc, "ttft_ms_p50_miss"),
             f"measured ({pc.get('requests_miss')} requests, prompt mean "
             f"{fmt(pc.get('prompt_tokens_mean_miss'), 1)} tokens)"],
            ["requests the server said nothing of", str(pc.get("requests_unreported")),
             "measured (no cached_tokens in the answer)"]]
    return [("h", "Prefix cache"), ("table", ["figure", "value", "evidence"], rows),
            ("p", f"Rule: {pc.get('rule') or 'n/a'}. A TTFT gap is read against the prompt "
                  "lengths behind it.")]


def prefix_line(s: dict, meta: Optional[dict] = None) -> Optional[str]:
    """The console's prefix-cache line, or None when there is nothing to say."""
    pc = _prefix_cache(s, meta)
    if pc is None:
        return None
    if not (pc.get("requests_hit") or 0) + (pc.get("requests_miss") or 0):   # one reason, once
        return (f"prefix cache: server hit rate {_pct(pc, 'server_hit_rate')}   cached share, TTFT "
                f"hit vs miss {_pct(pc, 'cached_prompt_fraction')} "
                f"({pc.get('requests_unreported')} unreported)")
    return (f"prefix cache: server hit rate {_pct(pc, 'server_hit_rate')}   cached share of prompt "
            f"tokens {_pct(pc, 'cached_prompt_fraction')}   TTFT p50 hit "
            f"{_ms(pc, 'ttft_ms_p50_hit')} vs miss {_ms(pc, 'ttft_ms_p50_miss')} "
            f"({pc.get('requests_hit')} hits, {pc.get('requests_miss')} misses, "
            f"{pc.get('requests_unreported')} unreported)")


def spec_line(s: dict) -> Optional[str]:
    """The console's speculative-decoding line (server acceptance, client tokens per chunk), or
    None when there is nothing to say (no spec-decode counters and one token per chunk)."""
    sd = s.get("spec_decode")
    if not isinstance(sd, dict):
        return None
    c = sd.get("client") or {}
    bursty = c.get("status") == "measured" and (c.get("multi_token_chunk_share") or 0) > 0
    if sd.get("status") != "measured" and not bursty:
        return None
    why = missing(sd.get("reason"))
    acc = sd.get("acceptance_rate")
    mal = sd.get("mean_acceptance_length")
    out = (f"spec decode: acceptance rate {fmt(acc) if acc is not None else why}   mean acceptance "
           f"length {fmt(mal) if mal is not None else why}")
    if sd.get("status") == "measured":
        out += f" ({sd.get('accepted_tokens')} of {sd.get('draft_tokens')} draft tokens)"
    tpc = c.get("tokens_per_chunk") or {}
    out += (f"   tokens per chunk mean {fmt(tpc.get('mean'))} (max {fmt(tpc.get('max'), 0)}; "
            f"{fmt(100 * c['multi_token_chunk_share'], 1)} % of chunks carried several)"
            if c.get("status") == "measured" else
            f"   tokens per chunk {missing(c.get('reason'))}")
    return out


def served_blocks(s: dict) -> list[Block]:
    return model_blocks(s) + spec_blocks(s)
