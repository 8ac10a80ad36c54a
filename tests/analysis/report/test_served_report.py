"""The run report's and the console's prefix-cache and speculative-decoding figures
(analysis.report.served, loadgen.console.progress.print_summary), on summary blocks the pure functions
build from hand-made records and /metrics rows: shown when there is something to say, a missing
figure as "n/a: REASON", never 0; nothing at all when the server said nothing and nothing was asked.
Then once through a real `loadgen run` + `loadgen report` against the calibration server."""
from __future__ import annotations

import io
import json

import pytest
import yaml
from rich.console import Console

from analysis.metrics.bursts import bursts_block
from analysis.metrics.prefix_cache import NO_USAGE, prefix_cache_block
from analysis.report.render import render_md
from analysis.report.served import prefix_blocks, prefix_line, served_blocks, spec_line
from analysis.server.spec_decode import server_figures
from loadgen.console.progress import print_summary
from tests.analysis.synth import rec, steady

ASKED = {"workload": {"prefix": {"groups": 4, "tokens": 64}, "shared_prefix_tokens": 0}}


def cached(i, n, ttft_ms, prompt=100):
    return rec(i, sched=0, sent=0, chunks=[(ttft_ms, 1), (ttft_ms + 5, 1)], prompt=prompt,
               cached_tokens=n)


def hit_rate(value):
    return {"status": "measured", "reason": None,
            "figures": {"prefix_cache_hit_rate": {"value": value, "reason": None}}}


def spec_rows(drafts=100, draft_tokens=300, accepted=180):
    out = [{"t_ns": t, "name": "loadgen:scrape", "labels": {"status": "ok"}, "value": 0.01}
           for t in (9_000, 21_000)]
    for name, v in (("drafts", drafts), ("draft_tokens", draft_tokens), ("accepted_tokens", accepted)):
        out += [{"t_ns": 9_000, "name": f"vllm:spec_decode_num_{name}_total", "labels": {}, "value": 0.0},
                {"t_ns": 21_000, "name": f"vllm:spec_decode_num_{name}_total", "labels": {},
                 "value": float(v)}]
    return out


def console(summary, run_dir="runs/x") -> str:
    c = Console(file=io.StringIO(), width=400, record=True)
    print_summary(summary, str(run_dir), console=c)
    return " ".join(c.export_text().split())


def test_prefix_cache_hits_and_misses_in_report_and_console():
    recs = [cached(0, 0, 40), cached(1, 64, 10), cached(2, 64, 12), cached(3, 0, 50)]
    s = {"prefix_cache": prefix_cache_block(recs, hit_rate(0.25))}
    md = render_md(prefix_blocks(s))
    assert "## Prefix cache" in md
    assert "| server hit rate (prompt tokens hit / queried) | 25.0 % |" in md
    assert "| cached share of the prompt tokens | 32.0 % |" in md          # 128 / 400
    assert "| TTFT p50 of hits (cached_tokens > 0) | 11.00 ms | measured (2 requests" in md
    assert "| TTFT p50 of misses (cached_tokens == 0) | 45.00 ms | measured (2 requests" in md
    line = prefix_line(s)
    assert line == ("prefix cache: server hit rate 25.0 %   cached share of prompt tokens 32.0 %   "
                    "TTFT p50 hit 11.00 ms vs miss 45.00 ms (2 hits, 2 misses, 0 unreported)")
    assert " ".join(line.split()) in console(s)


def test_prefix_cache_missing_figures_say_why_never_zero():
    s = {"prefix_cache": prefix_cache_block(steady(3))}          # no cached_tokens, no scrape
    assert prefix_blocks(s) == [] and prefix_line(s) is None      # nothing to say, nothing asked
    assert "prefix cache" not in console(s)
    md = render_md(prefix_blocks(s, ASKED))                      # the workload asked: say why
    assert f"| cached share of the prompt tokens | n/a: {NO_USAGE} |" in md
    assert "| server hit rate (prompt tokens hit / queried) | n/a: no server metrics" in md
    assert f"| TTFT p50 of hits (cached_tokens > 0) | n/a: {NO_USAGE} |" in md
    trace = {"workload": {"trace": {"format": "mooncake", "block_tokens": 64, "distinct_blocks": 9}}}
    assert prefix_blocks(s, trace) and prefix_line(s, {"workload": {"trace": {"rows": 3}}}) is None
    line = prefix_line(s, ASKED)
    assert line.startswith("prefix cache: server hit rate n/a: no server metrics")
    assert "0.0 %" not in line and line.endswith(f"cached share, TTFT hit vs miss n/a: {NO_USAGE} "
                                                 "(3 unreported)")
    # the server counted (its hit rate) but no answer carried cached_tokens: shown, unasked
    s = {"prefix_cache": prefix_cache_block(steady(3), hit_rate(0.5))}
    assert "server hit rate 50.0 %   cached share, TTFT hit vs miss n/a: " in prefix_line(s)
    # a hit and no miss: each figure on its own, the missing one with its reason
    s = {"prefix_cache": prefix_cache_block([cached(0, 64, 10)], hit_rate(0.9))}
    assert prefix_line(s).endswith("TTFT p50 hit 10.00 ms vs miss n/a: no completed measured "
                                   "request with cached_tokens == 0 (1 hits, 0 misses, 0 unreported)")


def test_spec_decode_acceptance_and_tokens_per_chunk():
    burst = rec(0, sched=0, sent=0, chunks=[(1, 0), (5, 1), (15, 3), (25, 1), (35, 4)], end=36)
    sd = server_figures(spec_rows(), (10_000, 20_000), {"url": "http://x/metrics"})
    sd["client"] = bursts_block([burst])
    s = {"spec_decode": sd}
    line = spec_line(s)
    assert line == ("spec decode: acceptance rate 0.60   mean acceptance length 2.80 (180 of 300 "
                    "draft tokens)   tokens per chunk mean 2.25 (max 4; 50.0 % of chunks carried "
                    "several)")
    assert " ".join(line.split()) in console(s)
    md = render_md(served_blocks(s))
    assert "| acceptance rate | 0.60 |" in md and "| mean acceptance length (tokens per step) | 2.80 |" in md
    assert "2.25 tokens per content chunk" in md
    # no counters in the window, bursty chunks: the server figures say why
    sd = server_figures([r for r in spec_rows() if "spec_decode" not in r["name"]], (10_000, 20_000))
    sd["client"] = bursts_block([burst])
    line = spec_line({"spec_decode": sd})
    assert line.startswith("spec decode: acceptance rate n/a: the server's /metrics has no "
                           "vllm:spec_decode_* counters")
    assert "tokens per chunk mean 2.25" in line and " 0.00" not in line
    # drafts made, none in the window: acceptance undefined, said so
    flat = [dict(r, value=0.0) for r in spec_rows()]
    sd = server_figures(flat, (10_000, 20_000))
    sd["client"] = bursts_block(steady(2))
    assert "acceptance rate n/a: no draft tokens in the window" in spec_line({"spec_decode": sd})


def test_spec_decode_nothing_to_say_is_silent():
    sd = server_figures([], (10_000, 20_000), {"status": "off"})
    sd["client"] = bursts_block(steady(3))                        # one token per chunk
    s = {"spec_decode": sd}
    assert spec_line(s) is None and served_blocks(s) == []
    assert "spec decode" not in console(s)


@pytest.mark.timeout(300)
def test_run_and_report_against_calib(calib_server, tmp_path, capsys):
    """Prefix groups asked, chunks of 3 tokens: the console and report.md show both sections,
    the prefix cache's figures as n/a with the reason (calib sends no cached_tokens)."""
    from loadgen.cli import main as cli_main
    sc = {"name": "served-report", "target": {"url": calib_server.url, "scrape_metrics": False},
          "api": {"endpoint": "completions", "continuous_usage": True,    # tokens per chunk
                  "extra_body": {"calib": {"ttft_ms": 1, "itl_ms": 1, "tokens_per_chunk": 3}}},
          "workload": {"tokenizer": "bytes", "seed": 1,
                       "prefix": {"groups": 2, "tokens": 32, "popularity": "uniform"},
                       "prompt_tokens": {"dist": "fixed", "value": 16},
                       "output_tokens": {"dist": "fixed", "value": 6}},
          "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 6},
          "output": {"dir": str(tmp_path), "run_name": "run", "report": "text"}}
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(sc))
    capsys.readouterr()
    assert cli_main(["run", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())     # rich wraps a long line in a pipe
    assert f"cached share, TTFT hit vs miss n/a: {NO_USAGE} (6 unreported)" in out
    assert ("spec decode: acceptance rate n/a: no server metrics: target.scrape_metrics is false "
            "mean acceptance length n/a: no server metrics") in out
    assert "tokens per chunk mean 3.00 (max 3; 100.0 % of chunks carried several)" in out
    d = tmp_path / "run"
    s = json.loads((d / "summary.json").read_text())
    assert s["prefix_cache"]["cached_prompt_fraction"] is None
    assert cli_main(["report", str(d)]) == 0
    md = (d / "report.md").read_text()
    assert "## Prefix cache" in md and f"| cached share of the prompt tokens | n/a: {NO_USAGE} |" in md
    assert "## Speculative decoding and bursts" in md and "3.00 tokens per content chunk" in md
