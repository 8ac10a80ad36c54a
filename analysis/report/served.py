"""The report's sections on what the server did with the run's requests (summary.json ─► blocks).

    summary["models"]      ─► one row per model / LoRA adapter (api.models): share, failures,
                              TTFT/TPOT, ITL p99, req/s, output tok/s, goodput
    summary["spec_decode"] ─► the server's draft acceptance (counters over the window, per
                              position) and the client's tokens per chunk, ITL per token vs per chunk
    summary["prefix_cache"] ─► prefix_blocks: the server's hit rate, the cached share of the prompt
                              tokens, TTFT p50 of hits vs misses (with the prompt lengths behind them)
    the console (loadgen.console.progress) ─► prefix_line, spec_line: the same figures in one line each
Nothing when the run had none of them (one model; no spec-decode counters and single-token chunks;
a prefix cache that said nothing in a run whose workload asked for no shared prefix). A figure
that is missing is written "n/a: REASON", never 0.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from analysis.contract.base import ContractError
from analysis.contract.meta import RunMeta
from analysis.contract.summary import PrefixCache, Summary
from analysis.contract.summary_server import ChunkStats, SpecClient, SpecDecode
from analysis.report.render import Block, fmt, group_blocks, missing


def model_blocks(s: dict | Summary) -> list[Block]:
    s = Summary.read(s)
    if not s.models:
        return []
    return group_blocks("Models (api.models)",
                        "Each model's (or LoRA adapter's) measured requests, as "
                        "api.model_assignment dealt them; rates over the run's window (so they "
                        "add up to the run's).", "model",
                        list(s.models.items()),
                        s.headline_ttft == "ttft_from_scheduled_ms")


def _spec(s: dict | Summary) -> tuple[Optional[SpecDecode], SpecClient]:
    """(summary.json's spec_decode, its client block) when there is something to say: the
    server's counters were measured, or some chunks carried several tokens; else (None, ...)."""
    sd = Summary.read(s).spec_decode
    c = (sd.client if sd else None) or SpecClient()
    bursty = c.status == "measured" and (c.multi_token_chunk_share or 0) > 0
    return (sd if sd and (sd.status == "measured" or bursty) else None), c


def spec_blocks(s: dict | Summary) -> list[Block]:
    sd, c = _spec(s)
    if sd is None:
        return []
    out: list[Block] = [("h", "Speculative decoding and bursts")]
    if sd.status == "measured":
        rows = [["draft tokens", str(sd.draft_tokens)],
                ["accepted tokens", str(sd.accepted_tokens)],
                ["acceptance rate", fmt(sd.acceptance_rate)],
                ["mean acceptance length (tokens per step)", fmt(sd.mean_acceptance_length)]]
        rows += [[f"accepted at position {p.position} (per draft)", fmt(p.acceptance_rate)]
                 for p in sd.per_position or []]
        out += [("p", "The server's counters (vllm:spec_decode_*) over the measured window."
                 + (f" {sd.reason}." if sd.reason else "")),
                ("table", ["server figure", "value"], rows)]
    else:
        out.append(("p", f"Server: {sd.reason}."))
    if c.status == "measured":
        tpc, pt, pc = c.tokens_per_chunk, c.itl_ms_per_token or NONE, c.itl_ms_per_chunk or NONE
        out += [("p", f"Client: {fmt(tpc.mean)} tokens per content chunk on average (max "
                      f"{fmt(tpc.max, 0)}); {fmt(100 * c.multi_token_chunk_share)} % of the "
                      f"chunks carried several tokens ({fmt(100 * c.tokens_in_bursts_share)} % of "
                      "the tokens). Tokens per chunk: "
                      + ", ".join(f"{k}: {v}" for k, v in (c.histogram or {}).items()) + "."),
                ("table", ["ITL", "p50 ms", "p99 ms", "mean ms", "count"],
                 [["per token (itl_ms)", fmt(pt.p50), fmt(pt.p99), fmt(pt.mean), _count(pt)],
                  ["per chunk (chunk_gap_ms)", fmt(pc.p50), fmt(pc.p99), fmt(pc.mean),
                   _count(pc)]])]
    return out


NONE = ChunkStats()           # a distribution the block did not give: every figure n/a


def _count(x: ChunkStats) -> str:
    return str(x.count) if x is not NONE else "None"


def prefix_asked(meta: Optional[dict | RunMeta]) -> bool:
    """Whether the run's workload asked for shared prompt prefixes (meta.json workload: prefix
    groups, shared_prefix_tokens, or a trace whose prompts share hash_id blocks): then the prefix
    cache's figures are shown even when null."""
    w = RunMeta.read(meta).workload
    if w is None:
        return False
    blocks = ((w.trace or {}).get("distinct_blocks") or 0) > 0     # the trace's own description
    return bool(w.prefix or w.shared_prefix_tokens or blocks)


def run_meta(run_dir) -> dict:
    """meta.json of a run directory, read through the contract (analysis.contract.meta.RunMeta),
    as a dict; {} when absent or unreadable (the console's view)."""
    try:
        return RunMeta.read_file(Path(run_dir) / "meta.json").as_dict()
    except (OSError, ValueError, TypeError, ContractError):
        return {}


def _prefix_cache(s: dict | Summary, meta: Optional[dict | RunMeta]) -> Optional[PrefixCache]:
    """summary["prefix_cache"] when there is something to say: the server reported (its hit rate,
    or cached_tokens in any answer) or the workload asked for shared prefixes."""
    pc = Summary.read(s).prefix_cache
    if pc is None:
        return None
    reported = pc.server_hit_rate is not None or pc.requests_hit + pc.requests_miss > 0
    return pc if reported or prefix_asked(meta) else None


def _pct(pc: PrefixCache, key: str) -> str:
    v = getattr(pc, key)              # a named figure: a misspelt key is an AttributeError
    return f"{100 * v:.1f} %" if v is not None else missing(pc.reasons.get(key))


def _ms(pc: PrefixCache, key: str) -> str:
    v = getattr(pc, key)
    return f"{v:.2f} ms" if v is not None else missing(pc.reasons.get(key))


def prefix_blocks(s: dict | Summary, meta: Optional[dict | RunMeta] = None) -> list[Block]:
    pc = _prefix_cache(s, meta)
    if pc is None:
        return []
    rows = [["server hit rate (prompt tokens hit / queried)", _pct(pc, "server_hit_rate"),
             "measured (server's /metrics counters over the window)"],
            ["cached share of the prompt tokens", _pct(pc, "cached_prompt_fraction"),
             "measured (usage.prompt_tokens_details.cached_tokens)"],
            ["TTFT p50 of hits (cached_tokens > 0)", _ms(pc, "ttft_ms_p50_hit"),
             f"measured ({pc.requests_hit} requests, prompt mean "
             f"{fmt(pc.prompt_tokens_mean_hit, 1)} tokens)"],
            ["TTFT p50 of misses (cached_tokens == 0)", _ms(pc, "ttft_ms_p50_miss"),
             f"measured ({pc.requests_miss} requests, prompt mean "
             f"{fmt(pc.prompt_tokens_mean_miss, 1)} tokens)"],
            ["requests the server said nothing of", str(pc.requests_unreported),
             "measured (no cached_tokens in the answer)"]]
    return [("h", "Prefix cache"), ("table", ["figure", "value", "evidence"], rows),
            ("p", f"Rule: {pc.rule or 'n/a'}. A TTFT gap is read against the prompt "
                  "lengths behind it.")]


def prefix_line(s: dict | Summary, meta: Optional[dict | RunMeta] = None) -> Optional[str]:
    """The console's prefix-cache line, or None when there is nothing to say."""
    pc = _prefix_cache(s, meta)
    if pc is None:
        return None
    if not pc.requests_hit + pc.requests_miss:   # one reason, once
        return (f"prefix cache: server hit rate {_pct(pc, 'server_hit_rate')}   cached share, TTFT "
                f"hit vs miss {_pct(pc, 'cached_prompt_fraction')} "
                f"({pc.requests_unreported} unreported)")
    return (f"prefix cache: server hit rate {_pct(pc, 'server_hit_rate')}   cached share of prompt "
            f"tokens {_pct(pc, 'cached_prompt_fraction')}   TTFT p50 hit "
            f"{_ms(pc, 'ttft_ms_p50_hit')} vs miss {_ms(pc, 'ttft_ms_p50_miss')} "
            f"({pc.requests_hit} hits, {pc.requests_miss} misses, "
            f"{pc.requests_unreported} unreported)")


def spec_line(s: dict | Summary) -> Optional[str]:
    """The console's speculative-decoding line (server acceptance, client tokens per chunk), or
    None when there is nothing to say (no spec-decode counters and one token per chunk)."""
    sd, c = _spec(s)
    if sd is None:
        return None
    why = missing(sd.reason)
    acc, mal = sd.acceptance_rate, sd.mean_acceptance_length
    out = (f"spec decode: acceptance rate {fmt(acc) if acc is not None else why}   mean acceptance "
           f"length {fmt(mal) if mal is not None else why}")
    if sd.status == "measured":
        out += f" ({sd.accepted_tokens} of {sd.draft_tokens} draft tokens)"
    tpc = c.tokens_per_chunk or NONE
    out += (f"   tokens per chunk mean {fmt(tpc.mean)} (max {fmt(tpc.max, 0)}; "
            f"{fmt(100 * c.multi_token_chunk_share, 1)} % of chunks carried several)"
            if c.status == "measured" else f"   tokens per chunk {missing(c.reason)}")
    return out


def served_blocks(s: dict | Summary) -> list[Block]:
    return model_blocks(s) + spec_blocks(s)
