"""Report rows that must not lie or puzzle (issue 29 item 17): a server TTFT percentile
interpolated above every TTFT the client saw, an unexplained n/a, a power panel "no power
samples" when no power source was asked for, "loadgen 0.1.0" listed twice in the manifest."""
import json

from analysis.metrics.summary import write_summary
from analysis.report import manifest, plots
from analysis.report.run_report import write_report
from analysis.report.server_metrics import server_metrics_section
from tests.analysis.synth import closed_loop, jax_sut, server_meta, write_run

T0, END = 10_000, 20_000


def row(t, name, value, **labels):
    return {"t_ns": t, "name": name, "labels": {"model_name": "m", **labels}, "value": value}


def ttft_hist(t, counts: dict, total_s: float) -> list:
    n = counts["+Inf"]
    return [{"t_ns": t, "name": "loadgen:scrape", "labels": {"status": "ok"}, "value": 0.001},
            row(t, "vllm:time_to_first_token_seconds_sum", total_s),
            row(t, "vllm:time_to_first_token_seconds_count", n),
            *(row(t, "vllm:time_to_first_token_seconds_bucket", c, le=le)
              for le, c in counts.items())]


def test_a_server_ttft_interpolated_above_the_clients_largest_is_bounded(tmp_path):
    # 100 server TTFTs: 90 in (0, 0.1 s], 10 in (0.1, 0.5 s]; interpolating p99 inside that
    # bucket gives 460 ms, but the client's largest TTFT (from send, which holds the server's)
    # was 250 ms
    rows = (ttft_hist(9_000, {"0.1": 0, "0.5": 0, "+Inf": 0}, 0.0)
            + ttft_hist(21_000, {"0.1": 90, "0.5": 100, "+Inf": 100}, 9.0))
    (tmp_path / "server_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recs = [{"id": i, "phase": "measured", "status": "ok", "scheduled_at_ns": 0,
             "sent_at_ns": 1_000_000, "first_token_at_ns": 1_000_000 + int(ms * 1e6),
             "end_at_ns": 1_000_000 + int((ms + 5) * 1e6)} for i, ms in enumerate((200, 250))]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (tmp_path / "meta.json").write_text(json.dumps({"t0_ns": T0, "end_ns": END}))
    md, ht = server_metrics_section(tmp_path)
    line = next(ln for ln in md.splitlines() if ln.startswith("| Server TTFT p99 |"))
    assert "≤ 250.00 ms (the client's largest TTFT; interpolating in bucket 100–500 ms gave " \
           "≈ 460.00 ms, above every request the client saw; n=100)" in line
    p50 = next(ln for ln in md.splitlines() if ln.startswith("| Server TTFT p50 |"))
    assert "≤ 100 ms" in p50                           # in the first bucket: a bound as before


def run(tmp_path, **meta):
    d = write_run(tmp_path / "run", closed_loop(2, 20),
                  server_meta(mode="concurrency", rate=None, min_queries=0, min_duration_s=0,
                              **meta), jax_sut())
    write_summary(d)
    write_report(d, with_plots=True)
    return d, (d / "report.md").read_text()


def test_rows_say_why_a_figure_is_missing_and_name_loadgen_once(tmp_path):
    d, md = run(tmp_path)
    line = next(ln for ln in md.splitlines() if ln.startswith("| target rate (req/s) |"))
    assert "n/a (no target rate: mode concurrency sets none)" in line
    tool = next(ln for ln in md.splitlines() if ln.startswith("| tool version |"))
    assert tool.count("loadgen 0.1.0") == 1 and "aiohttp 3.14.0" in tool
    seeds = next(ln for ln in md.splitlines() if ln.startswith("| seeds |"))
    assert "server None" not in seeds and "server not recorded" in seeds
    assert manifest.manifest_rows(manifest.manifest(d))[0][1].count("loadgen") == 1


def test_no_power_panel_when_no_power_source_was_asked_for(tmp_path):
    d, md = run(tmp_path)                        # power_sources ["none"]
    assert "throughput, in-flight requests (no power source configured)" in md
    series = {"status": "measured", "t_s": [0.0, 1.0], "bin_s": 1.0,
              "output_tokens_per_s": [1.0, 2.0], "in_flight": [1.0, 1.0], "power": []}
    img, note = plots.timeseries_png(series, power_asked=True)    # asked, none came: said so
    assert img and note.endswith("throughput, in-flight requests, power")
    img, note = plots.timeseries_png(series, power_asked=False)
    assert img and "power" not in note.replace("no power source configured", "")
