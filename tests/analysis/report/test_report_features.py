"""Issue #38: the run report (report.md) and the console say what the run did beyond plain
requests: retries (api.retry), client hang-ups (load.cancel: aborted, in the counts line too) and
audio (transcriptions: RTFx); each only when the run had it, a missing figure "n/a: REASON".
Run directories built from synthetic records (tests/analysis/synth.py)."""
from __future__ import annotations

import io

from rich.console import Console

from analysis.metrics.summary import store_summary
from analysis.report.render import render_md
from analysis.report.run_report import build_sections
from loadgen.console.progress import print_summary
from tests.analysis.synth import MS, rec, server_meta, steady, write_run

S = 1_000_000_000   # ns per s


def _report(tmp_path, records, meta) -> tuple[str, str]:
    d = write_run(tmp_path / "run", records, meta)
    s = store_summary(d)
    md = render_md(build_sections(d, with_plots=False)[0])
    c = Console(file=io.StringIO(), width=400, record=True)
    print_summary(s, str(d), console=c)
    return md, " ".join(c.export_text().split())


def retried(i: int) -> dict:
    """Three attempts: two 429s answered at once, each followed by a 1 s wait, then the answer."""
    t0 = i * 3000
    log = [[429, t0 * MS, t0 * MS + 1000, "rate_limited"],
           [429, (t0 + 1000) * MS + 1000, (t0 + 1000) * MS + 2000, "rate_limited"],
           [200, (t0 + 2000) * MS + 2000, (t0 + 2100) * MS, None]]
    return rec(i, sched=t0, sent=t0, chunks=[[t0 + 2050, 1], [t0 + 2060, 1], [t0 + 2100, 0]],
               attempts=3, attempt_log=log)


def test_retries_section_and_console_line(tmp_path):
    md, con = _report(tmp_path, [retried(i) for i in range(12)], server_meta(mode="concurrency"))
    assert "## Retries (api.retry)" in md
    assert "| requests sent more than once (api.retry) | 12 of 12 | measured |" in md
    assert "| attempts of those requests in all (mean per request) | 36 (3.000) |" in md
    assert "| time spent waiting between attempts (s; mean per request) | 24.00 (2.000) |" in md
    assert "FIRST attempt's send" in md
    assert "retried (api.retry): 12 of 12 request(s), 36 attempts, 24.00 s waiting" in con


def aborted(i: int, t: float, tokens: int) -> dict:
    ch = [[t + 20 + 10 * k, 1] for k in range(tokens)]
    return rec(i, sched=t, sent=t, chunks=ch, end=t + 25 + 10 * tokens, status="aborted",
               error_kind="aborted", finish_reason=None)


def test_hangups_section_counts_line_and_console(tmp_path):
    recs = steady(27) + [aborted(27 + k, 50.0 * k, 0 if k < 3 else 2) for k in range(13)]
    md, con = _report(tmp_path, recs, server_meta())
    assert "| completed / failed / cancelled / aborted | 27 / 0 / 0 / 13 | measured |" in md
    assert "## Client hang-ups (load.cancel)" in md
    assert "| requests the client hung up on (status aborted) | 13 of 40 | measured |" in md
    assert "| of those, with a first token | 10 | measured |" in md
    assert "| output tokens received before hanging up | 20 | measured |" in md
    assert ("| server's running requests after the run | n/a (no check ran: it needs load.cancel "
            "and target.scrape_metrics) |") in md
    assert "requests: ok 27 failed 0 cancelled 0 aborted 13 warm-up" in con
    assert "aborted (load.cancel): 13 of 40 (not failures), 10 after their first token" in con


def test_a_run_without_them_shows_no_such_section(tmp_path):
    md, con = _report(tmp_path, steady(20), server_meta())
    assert "| completed / failed / cancelled | 20 / 0 / 0 |" in md
    for head in ("Retries", "Client hang-ups", "Audio"):
        assert f"## {head}" not in md
    for word in ("aborted", "retried", "audio", "RTFx"):
        assert word not in con


def test_audio_section_and_console_line(tmp_path):
    recs = [dict(r, input_audio_s=5.0) for r in steady(20)]
    meta = server_meta(workload={"audio": {"seconds": 5.0, "sample_rate": 16000, "format": "wav",
                                           "pool": 4}})
    md, con = _report(tmp_path, recs, meta)
    for line in ("## Audio (transcriptions)",
                 "| RTFx (audio s transcribed per wall s, whole run) |",
                 "| requests completed / sent with audio | 20 / 20 | measured |",
                 "| audio sent (s): total / per request | 100.0 / 5.000 | measured |",
                 "| clips (seconds, sample rate, format, pool) | 5.0, 16000, wav, 4 | configured |"):
        assert line in md
    assert "audio: RTFx " in con and "100.0 s of audio in 20 requests" in con


def test_audio_without_a_completed_request_says_why(tmp_path):
    recs = [rec(i, sched=10 * i, sent=10 * i, end=10 * i + 5, status="error",
                error_kind="http_error", input_audio_s=5.0) for i in range(3)]
    md, con = _report(tmp_path, recs, server_meta())
    assert "| RTFx (audio s transcribed per wall s, whole run) | n/a: no completed request with audio |" in md
    assert "audio: RTFx n/a: no completed request with audio" in con


def test_a_run_without_tpot_data_draws_no_empty_legend():
    """#38: one-token answers have no TPOT: its panel says "no data" and draws no legend (matplotlib
    warned "No artists with labels found to put in legend")."""
    import warnings

    from analysis.report import plots
    if not plots.available():
        return
    recs = [rec(i, sched=50 * i, sent=50 * i, chunks=[[50 * i + 20, 1]]) for i in range(10)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        png, _ = plots.cdf_png(recs, False, None)
    assert png is not None
    assert not [w for w in caught if "legend" in str(w.message)], [str(w.message) for w in caught]
