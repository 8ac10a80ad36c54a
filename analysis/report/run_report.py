"""The human report of one run: report.md and a self-contained report.html (inline CSS and PNGs).

    run_dir ─► summary.load_run (records; meta, sut through analysis.contract)
            ─► summary.summary_of: summary.json as the run computed it (analysis.contract.Summary),
               computed by the same summarize_run only when absent or of an older contract
            ─► sections (headings, tables, figures)
            ─► plots (CDFs; series.run_series per-second throughput, in flight, power)
            ─► conditions.conditions_table / roofline_blocks, manifest.manifest
            ─► render.render_md, render.render_html ─► output.write_pages: report.md/.html
               written whole or not at all (a failed write: report.error.txt, StorageError)

Sections: headline, verdict, client health, latency percentiles, plots (HTML only), accuracy,
cost, prefix cache, client hang-ups, retries, audio (each only when the run had it), failures,
token-count provenance, energy, roofline, the 11 comparison conditions and the reproducibility
manifest. Every figure carries its
evidence status; a missing figure says why.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from analysis.atomic import write_text
from analysis.contract.rundir import read_repeat, records_path
from analysis.report import conditions
from analysis.report import manifest
from analysis.report import plots
from analysis.metrics import series
from analysis.metrics.figures import open_loop
from analysis.metrics import summary as summary_mod
from analysis.report.output import write_pages
from analysis.report.render import Block, fmt, missing, render_html, render_md
from analysis.report.workloads import workload_blocks
from analysis.report.cost_accuracy import accuracy_blocks, cost_blocks
from analysis.report.served import prefix_blocks
from analysis.report.server_traces import server_timing_blocks
from analysis.report.audio import audio_blocks
from analysis.report.hangups import aborted_blocks, counts, retry_blocks
from analysis.contract import Summary
from analysis.contract.power import PowerSource
from analysis.contract.records import Records
from analysis.contract.summary import Embeddings, Stats, SteadyState
from analysis.contract.summary_blocks import AboveIdle, Energy, EnergyWindow, PerRequestEnergy

__all__ = ["build_sections", "write_report", "write_any", "render_md", "render_html", "fmt"]

PCT_COLS = ("mean", "p50", "p90", "p95", "p99", "p999", "max", "count")
METRIC_ROWS = (("ttft_ms", "TTFT from send"), ("ttft_from_scheduled_ms", "TTFT from scheduled"),
               ("tpot_ms", "TPOT"), ("itl_ms", "ITL (token-weighted)"),
               ("chunk_gap_ms", "chunk gap (raw)"), ("e2el_ms", "E2E from send"),
               ("e2el_from_scheduled_ms", "E2E from scheduled"), ("schedule_lag_ms", "schedule lag"))


# an embeddings run has no first token: its headline is latency, req/s, input tokens/s, inputs/s
EMBEDDINGS_ROWS = (("e2el_ms", "E2E from send"), ("e2el_from_scheduled_ms", "E2E from scheduled"),
                   ("schedule_lag_ms", "schedule lag"))


def _embeddings_rows(e: Embeddings) -> list[list]:
    lat = e.latency_ms or Stats()
    return [["latency p50 / p90 / p99 (ms)",
             " / ".join(fmt(x, 3) for x in (lat.p50, lat.p90, lat.p99)), "measured"],
            ["request throughput (req/s)", fmt(e.request_throughput, 3), "measured"],
            ["input throughput (tokens/s)", fmt(e.input_token_throughput),
             "measured (tokens: " + (", ".join(f"{k} {v}" for k, v in
                                              e.prompt_tokens_source.items())
                                     or "none") + ")"],
            ["inputs embedded per second", fmt(e.input_throughput, 3), "measured"],
            ["inputs per request (mean)", fmt(e.inputs_per_request, 3), "measured"]]


def _headline(s: dict, typed: Summary) -> list[Block]:
    emb = typed.embeddings
    key = s["headline_ttft"]
    label = "TTFT from scheduled" if key == "ttft_from_scheduled_ms" else "TTFT from send"
    v = s["verdict"]
    rows = [
        [f"{label} p50 / p99 (ms)", f"{fmt(s[key]['p50'])} / {fmt(s[key]['p99'])}", "measured"],
        ["TPOT p50 / p99 (ms)", f"{fmt(s['tpot_ms']['p50'])} / {fmt(s['tpot_ms']['p99'])}",
         "measured"],
        ["output throughput (tokens/s)", fmt(s["output_throughput"]), "measured"],
        ["request throughput (req/s)", fmt(s["request_throughput"], 3), "measured"],
    ] if not emb else _embeddings_rows(emb)
    rows += [
        *_steady_rows(typed.steady_state),
        ["goodput (req/s meeting the SLOs)",
         fmt(s["goodput"], 3) if s["goodput"] is not None else "n/a (no SLO configured)",
         "measured"],
        [*counts(s), "measured"],          # "/ aborted" when the client hung up on some
        ["duration (s)", fmt(s["duration_s"], 3), "measured"],
        ["verdict", "VALID" if v["valid"] else "INVALID", "calculated"],
    ]
    out: list[Block] = [("h", "Headline"), ("table", ["figure", "value", "evidence"], rows),
                        ("p", f"Window: {s['window']['rule']}.")]
    st = typed.steady_state
    if st:
        out.append(("p", f"Steady-state window ({st.status}): {st.rule}"
                         + (f"; unavailable: {st.reason}" if st.reason else "")
                         + ". The figures above without \"steady-state\" use the full window."))
    return out


def _steady_rows(st: Optional[SteadyState]) -> list[list]:
    """Headline rows of the steady-state window (analysis.metrics.steady), next to the full-window ones."""
    if not st:
        return []
    if st.status != "ok":
        return [["steady-state window", missing(st.reason, "no steady-state window"),
                 "calculated"]]
    return [["steady-state output throughput (tokens/s)", fmt(st.output_throughput),
             "measured"],
            ["steady-state request throughput (req/s)", fmt(st.request_throughput, 3),
             "measured"],
            ["steady-state window (s) / level / mean in flight",
             f"{fmt(st.duration_s, 3)} / {fmt(st.level)} / "
             f"{fmt(st.mean_in_flight, 2)}", "measured"]]


def _verdict(s: dict) -> list[Block]:
    v = s["verdict"]
    out: list[Block] = [("h", "Verdict"),
                        ("p", ("VALID" if v["valid"] else "INVALID") + f" (SLO: {s['slo']['source']}; "
                         f"percentile p{v['percentile']:g})")]
    out += [("p", f"reason: {r}") for r in v["reasons"]]
    out += [("p", f"note: {n}") for n in v["notes"]]
    rows = [[c["name"], "pass" if c["ok"] else "FAIL", fmt(c["value"], 3), fmt(c["limit"], 3)]
            for c in v["checks"]]
    out.append(("table", ["check", "result", "value", "limit"], rows))
    return out


def _client(s: dict) -> list[Block]:
    c = s["client"]
    out: list[Block] = [("h", "Client health")]
    out += [("warn", w) for w in c["warnings"]]
    rows = [["client CPU (fraction of one core)", fmt(c["cpu_fraction"]), c["evidence"]],
            ["client event-loop lag p99 (ms)", fmt(c["loop_lag_ms_p99"], 3),
             "measured" if c["loop_lag_ms_p99"] is not None else "unmeasured"],
            ["schedule-lag growth (ms)", fmt(c["lag_growth_ms"], 3), "measured"],
            ["achieved send rate (req/s)", fmt(c["achieved_send_rate"], 3), "measured"],
            ["schedule's own rate (req/s)", fmt(c["schedule_rate"], 3), "calculated"],
            ["target rate (req/s)", fmt(c["target_rate"], 3) if c["target_rate"] is not None
             else missing(None, f"no target rate: mode {s['mode']} sets none"
                          if s["mode"] != "server" else "load.stages or a trace set the rate"),
             "configured"],
            ["saturated", str(c["saturated"]), "calculated"]]
    return out + [("table", ["figure", "value", "evidence"], rows)]


def _latencies(s: dict, typed: Summary) -> list[Block]:
    """Every latency distribution; an embeddings run's only (no first token: no TTFT/TPOT/ITL)."""
    names = EMBEDDINGS_ROWS if typed.embeddings else METRIC_ROWS
    rows = [[label] + [fmt(s[k][c], 3) for c in PCT_COLS] for k, label in names]
    return [("h", "Latency percentiles (ms, measured; numpy linear percentiles)"),
            ("table", ["metric", *PCT_COLS], rows)]


def _failures(s: dict) -> list[Block]:
    f = s["failures_by_kind"]
    if not f:
        return [("h", "Failures"), ("p", "No measured request failed.")]
    return [("h", "Failures"), ("table", ["error_kind", "count"], [[k, v] for k, v in f.items()])]


def _tokens(s: dict) -> list[Block]:
    t = s["token_counts"]
    rows = [["output_tokens source", ", ".join(f"{k}: {v}" for k, v in t["output_tokens_source"].items())
             or "n/a"],
            ["prompt_tokens source", ", ".join(f"{k}: {v}" for k, v in t["prompt_tokens_source"].items())
             or "n/a"],
            ["requests with usage and chunk counts", t["with_both_counts"]],
            ["usage vs chunk count mismatches", t["mismatch_count"]],
            ["usage / chunk output tokens (those requests)",
             f"{fmt(t['usage_output_tokens_total'])} / {fmt(t['chunk_output_tokens_total'])}"]]
    return [("h", "Token-count provenance"), ("table", ["item", "value"], rows)]


def _status(block: Optional[Energy | AboveIdle]) -> Optional[str]:
    """A block's status; "unmeasured" when it has none (absent, or written without one)."""
    return block.status if block and "status" in block.model_fields_set else "unmeasured"


def _energy(typed: Summary) -> list[Block]:
    """Headline energy figures with their evidence, per scope and per source; why when missing."""
    e = typed.energy or Energy()
    st = _status(e)
    out: list[Block] = [("h", f"Energy ({st})")]
    if e.reason:
        out.append(("p", f"reason: {e.reason}"))
    out += [("warn", w) for w in e.warnings or []]
    if e.energy_j is None:
        return out
    win = e.window or EnergyWindow()
    rows = [["energy in the window (J)", fmt(e.energy_j, 3), st],
            ["window (s)", fmt(win.duration_s, 3), "measured"],
            ["average power (W)", fmt(e.avg_power_w, 2), st],
            ["J / output token", fmt(e.j_per_output_token, 4), st],
            ["output tokens / J", fmt(e.output_tokens_per_j, 4), st],
            ["J / request (J/token x mean output)", fmt(e.j_per_request, 4), st]]
    idle = e.above_idle or AboveIdle()
    rows.append(["above idle J / output token",
                 fmt(idle.j_per_output_token, 4) if idle.status == "measured"
                 else missing(idle.reason, "no idle baseline was measured"), _status(idle)])
    pr = e.per_request or PerRequestEnergy()
    if pr.mean_j is not None:
        rows.append(["per request J mean / p50 / p99 (prefill + decode)",
                     f"{fmt(pr.mean_j, 3)} / {fmt(pr.p50_j, 3)} / {fmt(pr.p99_j, 3)} "
                     f"({fmt(pr.mean_prefill_j, 3)} + {fmt(pr.mean_decode_j, 3)})",
                     "calculated (split)"])
    out.append(("table", ["figure", "value", "evidence"], rows))
    srcs = [[f"{x.source}/{x.device}", x.scope, x.method, fmt(x.energy_j, 3),
             fmt(x.avg_power_w, 2), x.samples, "yes" if x.included_in_total else "no", x.evidence]
            for x in e.series or []]
    if srcs:
        out.append(("table", ["source/device", "scope", "method", "J", "W", "samples",
                              "in total", "evidence"], srcs))
    out += [("p", f"not measured: {u}") for u in e.unmeasured_parts or []]
    out += [("p", f"Energy window: {e.window_rule}.")] if e.window_rule else []
    return out + [("p", f"Method: {e.method}.")]


def build_sections(run_dir: str | Path, with_plots: bool = True,
                   summary: Optional[dict] = None) -> tuple[list[Block], dict]:
    """All report blocks and the summary they came from (``summary``: another one than the
    run's summary.json, e.g. ``loadgen report --device``'s, written beside it)."""
    records, meta, sut = summary_mod.load_run(run_dir)
    s = summary if summary is not None else summary_mod.summary_of(run_dir)  # what the run computed
    blocks: list[Block] = [("title", f"loadgen report — {Path(run_dir).name}"),
                           ("p", f"mode: {s['mode']}; records: {len(records)} "
                                 f"({s['requests_warmup']} warm-up excluded)")]
    typed = Summary.read(s)                               # the blocks read as attributes
    blocks += _headline(s, typed) + _verdict(s) + _client(s) + _latencies(s, typed)
    blocks += workload_blocks(s) + _plots(records, typed, run_dir, with_plots)
    blocks += accuracy_blocks(s) + cost_blocks(s)        # workload.dataset, cost (issue 30)
    blocks += prefix_blocks(s, meta)                     # prefix cache (issue 31): hits vs misses
    blocks += server_timing_blocks(s, with_plots)        # server_traces (issue 39): spans joined
    blocks += aborted_blocks(s) + retry_blocks(s) + audio_blocks(s)   # load.cancel, api.retry, audio
    blocks += _failures(s) + _tokens(s) + _energy(typed) + _server_metrics(run_dir)
    blocks += conditions.roofline_blocks(typed.roofline)   # frozen spec (run_roofline)
    rows = [[c["item"], c["value"], c["evidence"]]
            for c in conditions.conditions_table(s, meta, sut, records)]
    blocks += [("h", "Comparison conditions"), ("table", ["condition", "value", "evidence"], rows)]
    blocks += [("h", "Reproducibility manifest"),
               ("table", ["item", "value", "evidence"], manifest.manifest_rows(
                   manifest.manifest(run_dir)))]
    return blocks, s


def _server_metrics(run_dir) -> list[Block]:
    """The server's own Prometheus figures (analysis.server.metrics); a failure in reading them
    must not take the rest of the report down."""
    from analysis.report.server_metrics import server_metrics_section
    try:
        md, page = server_metrics_section(run_dir)
    except Exception as e:  # noqa: BLE001 (a bug there is reported here, not raised)
        return [("h", "Server metrics"), ("p", f"Not shown: {type(e).__name__}: {e}.")]
    return [("raw", md, page)]


def _plots(records: Records, s: Summary, run_dir, with_plots: bool) -> list[Block]:
    """Distributions (CDF), per-second time series (throughput, in flight, power), timeline."""
    out: list[Block] = [("h", "Distributions and time series")]
    if not with_plots:
        return out + [("p", "plots not requested")]
    server = open_loop(s.mode)
    e = s.energy or Energy()
    described = [PowerSource.read(x) for x in e.sources or [] if isinstance(x, dict)]
    est = {"estimate"} | {src.name for src in described if src.evidence == "estimated"}
    ts = series.run_series(records, summary_mod.load_power(run_dir), estimated_names=est)
    asked = not str(e.reason or "").startswith("no power source configured")
    for img, note in (plots.cdf_png(records, server, s.slo),
                      plots.timeseries_png(ts, power_asked=asked),   # none asked: no power panel
                      plots.timeline_png(records, server)):
        out.append(("img", img, note) if img else ("p", note))
    return out


def write_report(run_dir: str | Path, with_plots: bool = True, summary: Optional[dict] = None,
                 stem: str = "report") -> tuple[Path, Path]:
    """Write run_dir/report.md and run_dir/report.html (``stem``.md/.html; ``summary``: see
    build_sections); returns their paths."""
    d = Path(run_dir)
    blocks, _ = build_sections(d, with_plots, summary)
    return write_pages(d, blocks, stem)          # whole or not at all (analysis.report.output)


def write_any(path: str | Path, with_plots: bool = True) -> tuple[Path, Path]:
    """write_report for a run directory, report_sweep.write_sweep_report for a sweep directory
    (one holding sweep.json); ValueError naming the path for anything else."""
    d = Path(path)
    if (d / "sweep.json").is_file():
        from analysis.report.sweep import write_sweep_report  # lazy: it imports this module
        return write_sweep_report(d, with_plots)
    if records_path(d).is_file():
        return write_report(d, with_plots)
    rep = read_repeat(d)                    # through analysis.contract
    if rep is not None and "figures" in rep:
        from analysis.metrics.repeats import repeat_summary
        from analysis.metrics.summary import summary_of
        from analysis.report.repeats import write_repeat_report
        runs = [Path(r) for r in rep.get("run_dirs") or []]
        fresh = repeat_summary([summary_of(r) for r in runs if records_path(r).is_file()])
        rep.update(fresh)                   # from the runs' own summaries, like a run's report
        write_text(d / "repeat.json", json.dumps(rep, indent=2, default=str))
        write_repeat_report(d, rep)
        return d / "report.md", d / "report.html"
    raise ValueError(f"{d}: neither a run directory (records.jsonl), a sweep directory "
                     "(sweep.json) nor a repeat directory (repeat.json)")
