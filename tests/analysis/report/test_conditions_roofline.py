"""The report's roofline section: the batch-1 decode line and the table by requests in flight."""
import json

from analysis.metrics import summary as summary_mod
from analysis.report import conditions, run_report
from analysis.report.render import render_md
from analysis.roofline import by_concurrency, devices, run_device
from tests.analysis.synth import jax_sut, rec, server_meta, spec_file, write_run


def _sequential(n_req=4, tokens=11, itl=10.0, gap=100.0):
    """Requests one after another, never two in flight: every gap is a batch-1 gap."""
    out = []
    for i in range(n_req):
        t = i * (tokens * itl + gap)
        ch = [[t + 20 + k * itl, 1] for k in range(tokens)]
        out.append(rec(i, sched=t, sent=t, chunks=ch, end=ch[-1][0] + 1))
    return out


def _run(tmp_path, recs, bandwidth=1e10):
    d = write_run(tmp_path / "run", recs, server_meta(), jax_sut())
    spec = devices.load_spec(spec_file(tmp_path / "spec.json", bandwidth=bandwidth))
    run_device.write(d, run_device.record(spec, "spec file"))
    summary_mod.write_summary(d)
    return d


def test_the_batch1_line_and_the_levels_table_in_the_report(tmp_path):
    d = _run(tmp_path, _sequential())
    b1 = json.loads((d / "summary.json").read_text())["roofline"]["batch1"]
    assert b1["gaps"] == 40 and b1["reason"] is None and 0 < b1["mbu"] < 1
    md, page = run_report.write_report(d, with_plots=False)
    text = md.read_text()
    assert ("| batch-1 decode (1 request in flight): ITL p50 (ms), gaps, context | 10.0000 over "
            "40 gaps, context 15.5 tokens | measured |") in text
    assert (f"| batch-1 decode (1 request in flight): decode floor (ms), MBU | "
            f"{b1['floor_ms']:.4f}, MBU {b1['mbu']:.4f} | calculated |") in text
    assert "| requests in flight | decode batch | gaps | ITL p50 (ms, measured) |" in text
    assert f"| 1 | 1 | 40 | 10.000 | 15.5 | {b1['floor_ms']:.3f} |" in text
    assert "0 gaps dropped (the count changed inside them)" in text
    assert "batch-1 decode (1 request in flight)" in page.read_text()


def test_a_missing_batch1_says_why_never_zero(tmp_path):
    # two requests always together: no gap with exactly one in flight
    recs = [rec(i, sent=0, chunks=[[20 + k * 10, 1] for k in range(30)], end=400) for i in (0, 1)]
    d = _run(tmp_path, recs)
    text = run_report.write_report(d, with_plots=False)[0].read_text()
    assert (f"| batch-1 decode (1 request in flight) | n/a: {by_concurrency.NO_BATCH1} | n/a |"
            in text)
    assert "| 2 | 2 | 58 | 10.000 |" in text


def test_a_summary_written_before_the_split_reads_as_not_recorded():
    old = {"status": "calculated", "mbu": 0.5, "tpot_p50_ms": 10.0, "decode_floor_ms": 5.0,
           "device": {"name": "d", "source": "frozen", "how": "t", "evidence": "documented"},
           "decode": {"batch": 1, "mean_in_flight": 1.0, "context_len": 10, "step_bytes": 1e6,
                      "step_flops": 2e6}, "prefill": None, "broken_floors": [], "rule": "r",
           "assumptions": "a"}
    text = render_md(conditions.roofline_blocks(old))
    assert "| batch-1 decode (1 request in flight) | n/a: not in this summary (written before" \
           in text
    assert "requests in flight" not in text      # no table invented for it


def test_too_few_gaps_shows_the_reason_for_the_mbu(tmp_path):
    d = _run(tmp_path, _sequential(n_req=1))
    text = run_report.write_report(d, with_plots=False)[0].read_text()
    assert "| batch-1 decode (1 request in flight): ITL p50 (ms), gaps, context | 10.0000 over " \
           "10 gaps" in text
    assert "MBU n/a: only 10 gap(s) at this level (an MBU needs 20) | calculated |" in text
