"""The report's "Server metrics" section: a server_metrics summary dict ─► (markdown, html).

    analysis.server.metrics.server_metrics_summary(run_dir) ─► render_section(sm)
        ─► a table (figure, value, evidence, metric or reason) + the TTFT decomposition sentence
    a histogram percentile prints its ``display``: the bucket and resolution of an interpolated
    point, or the bound (≤ hi, > lo) where the buckets cannot place it
    a server TTFT percentile interpolated above the client's largest TTFT (which holds the
    server's for every request) is shown as "≤ client max" with the interpolation named: the
    bucket cannot place it closer (``clamp_to_client``)
"""
from __future__ import annotations

import html

from analysis.contract.summary import Summary
from analysis.contract.summary_server import ServerFigure, ServerMetrics, TtftDecomposition
from analysis.server.metrics import server_metrics_summary
from analysis.contract.rundir import has_records

LABELS = {"server_ttft": "Server TTFT (mean)", "server_queue": "Queue time (mean)",
          "server_prefill": "Prefill time (mean)", "server_decode": "Decode time (mean)",
          "server_e2e": "Server E2E latency (mean)", "server_itl": "Server ITL (mean)",
          "server_ttft_p50": "Server TTFT p50", "server_ttft_p99": "Server TTFT p99",
          "server_queue_p99": "Queue time p99", "max_running": "Running requests (max)",
          "max_waiting": "Waiting requests (max)", "kv_usage_mean": "KV-cache usage (mean)",
          "kv_usage_max": "KV-cache usage (max)", "prefix_cache_hit_rate": "Prefix-cache hit rate",
          "server_prompt_tokens": "Prompt tokens (server count)",
          "server_generation_tokens": "Generated tokens (server count)"}


def _fmt(f: ServerFigure) -> str:
    v = f.value
    if v is None:
        return "—"
    if f.display:          # a histogram percentile: its bucket, resolution or bound
        return f.display
    if f.unit == "ms":
        return f"{v:.2f} ms (n={f.count})"
    if f.unit == "fraction":
        return f"{v * 100:.1f} %"
    return f"{v:g}"


TTFT_QUANTILES = ("server_ttft_p50", "server_ttft_p99")


def clamp_to_client(f: dict | ServerFigure, client_max_ms) -> ServerFigure:
    """A server TTFT percentile interpolated inside its bucket above the client's largest TTFT
    (from send, which holds the server's TTFT and the network) cannot be: the interpolation
    assumed observations spread evenly over the bucket. Shown as an upper bound at the client's
    maximum, the interpolated value named."""
    f = ServerFigure.read(f)
    v = f.value
    if client_max_ms is None or f.bound != "point" or v is None or v <= client_max_ms:
        return f
    lo, hi = (f.bucket_ms or [None, None])[:2]
    return f.model_copy(update={
        "value": client_max_ms, "bound": "upper",
        "display": f"≤ {client_max_ms:.2f} ms (the client's largest TTFT; interpolating in "
                   f"bucket {lo:g}–{hi:g} ms gave ≈ {v:.2f} ms, above every request the "
                   f"client saw; n={f.count})"})


def _table_rows(summary: ServerMetrics, client_max_ms=None) -> list[tuple[str, str, str, str]]:
    rows = []
    for key, f in summary.figures.items():            # by figure name
        if key in TTFT_QUANTILES:
            f = clamp_to_client(f, client_max_ms)
        rows.append((LABELS.get(key, key), _fmt(f), f.evidence, f.reason or f.metric or ""))
    return rows


def _decomp_text(dec: TtftDecomposition) -> str:
    if dec.status != "calculated":
        return f"TTFT decomposition unmeasured: {dec.reason}"

    def ms(v):
        return "unmeasured" if v is None else f"{v:.2f} ms"
    text = (f"Client TTFT {ms(dec.client_ttft_mean_ms)} (mean of {dec.client_requests} "
            f"requests; the server counted {dec.server_requests}) = "
            f"network/client {ms(dec.network_client_ms)} + server queue "
            f"{ms(dec.server_queue_ms)} + server prefill {ms(dec.server_prefill_ms)} + "
            f"server other {ms(dec.server_other_ms)}; residual (client − queue − prefill) "
            f"{ms(dec.residual_ms)}")
    if dec.queue_share is not None:
        text += f"; queueing is {dec.queue_share * 100:.1f} % of client TTFT"
    if dec.reason:
        text += f" ({dec.reason})"
    return text + ". Evidence: calculated from measured client and server means."


def render_section(sm: dict | ServerMetrics, client_max_ms=None) -> tuple[str, str]:
    """(markdown, html) of the "Server metrics" section from a server_metrics summary dict;
    ``client_max_ms``: the client's largest TTFT (from send), which bounds the server's."""
    sm = ServerMetrics.read(sm)
    if sm.status != "measured":
        md = f"## Server metrics\n\nUnmeasured: {sm.reason}.\n"
        return md, f"<h2>Server metrics</h2><p>Unmeasured: {html.escape(str(sm.reason))}.</p>"
    rows = _table_rows(sm, client_max_ms)
    w = sm.window
    head = (f"Scraped from {sm.source} ({sm.scrapes} scrapes); window edges "
            f"{w.start_lead_ms:.1f} ms before t0 and {w.end_lag_ms:.1f} ms after the end"
            + (f"; {sm.scrapes_failed} failed scrapes" if sm.scrapes_failed else "")
            + "".join(f"; {n}" for n in w.notes) + ".")
    dec = _decomp_text(sm.ttft_decomposition)
    md = ["## Server metrics", "", head, "", "| Figure | Value | Evidence | Source / reason |",
          "|---|---|---|---|"]
    md += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    md += ["", dec, ""]
    cells = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{c}</td>"
                    f"<td>{html.escape(d)}</td></tr>" for a, b, c, d in rows)
    ht = (f"<h2>Server metrics</h2><p>{html.escape(head)}</p><table><tr><th>Figure</th>"
          f"<th>Value</th><th>Evidence</th><th>Source / reason</th></tr>{cells}</table>"
          f"<p>{html.escape(dec)}</p>")
    return "\n".join(md), ht


def server_metrics_section(run_dir) -> tuple[str, str]:
    """(markdown, html) of the report's "Server metrics" section for a run directory."""
    return render_section(server_metrics_summary(run_dir), _client_ttft_max(run_dir))


def _client_ttft_max(run_dir):
    """The client's largest TTFT from send (summary.json), or None where there is none."""
    if not has_records(run_dir):
        return None
    from analysis.metrics.summary import summary_of
    try:
        ttft = Summary.read(summary_of(run_dir)).ttft_ms
        return ttft.max if ttft else None
    except (OSError, ValueError):      # the bound is a refinement: never the section's end
        return None
