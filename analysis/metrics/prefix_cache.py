"""What the server's prefix cache did with the run's prompts, as pure functions of records and the
server's /metrics figures.

    records' cached_tokens (usage.prompt_tokens_details.cached_tokens), prompt_tokens, TTFT
    summary's server_metrics.figures.prefix_cache_hit_rate (Δvllm:prefix_cache_hits /
        Δvllm:prefix_cache_queries over the measured window, tokens: analysis/server/metrics.py)
        ─► prefix_cache_block() ─► summary.json "prefix_cache":

    server_hit_rate         the server's own hit rate over the measured window (tokens hit /
                            tokens queried), from its counters; None when they were not scraped
                            or the sanity gate refused them (analysis/server/sanity.py: a reset
                            in the window, hits > queries), with the gate's reason
    cached_prompt_fraction  Σ cached_tokens / Σ prompt_tokens over the completed measured
                            requests whose answer said cached_tokens (the client's view of the same)
    ttft_ms_p50_hit         p50 TTFT of those with cached_tokens > 0 (a hit)
    ttft_ms_p50_miss        p50 TTFT of those with cached_tokens == 0 (a miss)
    requests_hit, requests_miss, requests_unreported   counts (unreported: the answer had no
                            cached_tokens)
    prompt_tokens_mean_hit, prompt_tokens_mean_miss    so a TTFT gap is read against the prompt
                            lengths behind it (a hit on a short prompt is no evidence)
    reasons                 {figure: why it is None} for every None figure

None (never 0) where the server said nothing: a server without prompt_tokens_details (vLLM without
--enable-prompt-tokens-details, servers.jax without --prefix-cache on) gives None for every
per-request figure, with the reason.
"""
from __future__ import annotations

from typing import Any, Optional

from analysis.contract import timing
from analysis.contract.summary_server import ServerFigure, ServerMetrics
from analysis.metrics import figures as m
from analysis.server import sanity

RULE = ("completed measured requests; hit = usage.prompt_tokens_details.cached_tokens > 0; "
        "server_hit_rate = Δprefix_cache_hits / Δprefix_cache_queries (tokens) over the window")
NO_USAGE = ("the server sent no usage.prompt_tokens_details.cached_tokens (vLLM: "
            "--enable-prompt-tokens-details; servers.jax: --prefix-cache on)")


def _server_rate(server_metrics: Optional[dict | ServerMetrics]
                 ) -> tuple[Optional[float], Optional[str]]:
    if not server_metrics:
        return None, "no server metrics (the /metrics scraper did not run)"
    sm = ServerMetrics.read(server_metrics)
    if sm.status != "measured":
        return None, f"server metrics unmeasured: {sm.reason}"
    fig = sm.figures.get("prefix_cache_hit_rate") or ServerFigure()    # figures: by name
    if fig.value is None:
        return None, fig.reason or "the server exposes no prefix-cache counters"
    c = sanity.number(fig.value, "server prefix-cache hit rate")
    if c.ok and not 0 <= c.value <= 1:
        c = sanity.Checked(None, f"server prefix-cache hit rate {c.value:g} outside [0, 1]")
    return (float(c.value), None) if c.ok else (None, c.reason)


def prefix_cache_block(records: list, server_metrics: Optional[dict] = None) -> dict:
    """summary.json's "prefix_cache" object (see the module docstring)."""
    done = m.completed(m.measured(records))
    # through the gate: a cached_tokens of the wrong type ("5") counts as unreported
    said = m.field(done, "cached_tokens")
    if said.count(None) == len(said):                        # none said: nothing to check
        cached, rep = said, []
    else:
        cached = [sanity.token_count(c).value for c in said]
        rep = [k for k, c in enumerate(cached) if c is not None]   # indices: no Record kept
    prompts = m.field(done, "prompt_tokens") if rep else []
    ttft = timing.per_record(done.table)["ttft_ms"] if rep else None
    hits = [k for k in rep if cached[k] > 0]
    misses = [k for k in rep if cached[k] == 0]
    both = [(cached[k], prompts[k]) for k in rep if prompts[k]]
    reasons: dict[str, str] = {}
    rate, why = _server_rate(server_metrics)
    if why:
        reasons["server_hit_rate"] = why
    out: dict[str, Any] = {"server_hit_rate": rate}
    if not rep:
        out["cached_prompt_fraction"] = None
        reasons["cached_prompt_fraction"] = NO_USAGE if done else "no completed measured request"
    elif not both:
        out["cached_prompt_fraction"] = None
        reasons["cached_prompt_fraction"] = "no answer said how many prompt tokens it had"
    else:
        out["cached_prompt_fraction"] = sum(c for c, _ in both) / sum(p for _, p in both)
    for key, group, name in (("hit", hits, "with cached_tokens > 0"),
                             ("miss", misses, "with cached_tokens == 0")):
        fig = f"ttft_ms_p50_{key}"
        out[fig] = m.percentile(ttft[group] if group else [], 50)
        if out[fig] is None:
            reasons[fig] = (NO_USAGE if not rep else f"no completed measured request {name}"
                            if not group else "no first token among them (not streamed?)")
        out[f"prompt_tokens_mean_{key}"] = _mean([prompts[k] for k in group])
    out.update(requests_hit=len(hits), requests_miss=len(misses),
               requests_unreported=len(done) - len(rep), reasons=reasons, rule=RULE)
    return out


def _mean(vals: list) -> Optional[float]:
    vals = [v for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else None
