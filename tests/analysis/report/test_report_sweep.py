"""The sweep report on a hand-built sweep directory (loadgen/multirun/sweep.py's layout)."""
import json
import shutil

import pytest

from analysis.roofline import model_cost
from analysis.report import plots
from analysis.report import run_report
from analysis.report import sweep as report_sweep
from tests.analysis.synth import TINY_SHAPE, spec_file, write_sweep

BW, PEAK = 4e7, 4e9


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "sweep", values=(1, 2, 4),
                       spec_path=spec_file(tmp_path / "spec.json", BW, PEAK))


def test_sweep_report_tables_and_figures(sweep):
    md, page = run_report.write_any(sweep)
    assert (md, page) == (sweep / "report.md", sweep / "report.html")
    text, h = md.read_text(), page.read_text()
    if plots.available():
        assert h.count("data:image/png;base64,") == 4   # latency, throughput, J/token, roofline
    # closed loop, itl = 10 + 2C ms, 8 tokens, TTFT 20 ms: C=1 -> 6 requests of 104 ms;
    # C=2 -> lanes 0.5 ms apart, 6 requests of 118 ms each -> 12 / 0.7085 s = 16.937 req/s
    # steady out tok/s: n/a, each run lasts < 1 s (the steady window's minimum)
    assert "| 1 | 6 | 0 | 9.615 | 76.9 | n/a | 9.615 | 20.00 | 20.00 | 12.00 | 12.00 |" in text
    assert "| 2 | 12 | 0 | 16.937 | 135.5 | n/a |" in text
    assert "steady out tok/s: output tokens/s over the steady-state window (closed loop:" in text
    assert "unavailable at 1: " in text and "< the minimum 1 s" in text
    # 120 W over 0.624 s for 48 tokens; 140 W over 0.7085 s for 96 tokens
    assert "| 1.5600 (measured) | VALID | concurrency-1 |" in text
    assert "| 1.0332 (measured) | VALID | concurrency-2 |" in text
    # decode roofline: batch = mean in flight = C; context 10 + 8/2 = 14; memory-bound
    for c, tpot in ((1, 12), (2, 14), (4, 18)):
        mem = model_cost.decode_step_bytes(TINY_SHAPE, c, 14) / BW * 1e3
        comp = model_cost.decode_step_flops(TINY_SHAPE, c, 14) / PEAK * 1e3
        mbu = model_cost.decode_step_bytes(TINY_SHAPE, c, 14) / (tpot / 1e3) / BW
        assert f"| {c} | {c} | {mem:.4f} | {comp:.4f} | {tpot:.4f} | {mbu:.3f} | memory |" in text
    assert "## Conditions that differ between points (besides the swept load)\n\nnone" in text
    assert "| precision | fp32 | recorded (server) |" in text
    assert "## Reproducibility manifest (first point)" in text


def test_roofline_curve_covers_the_server_slots(sweep):
    data = report_sweep.load_sweep(sweep)
    curve = report_sweep.roofline_curve(data["points"])
    assert [c["batch"] for c in curve] == [1, 2, 3, 4]       # jax_sut: 4 slots
    assert [c["decode_step"]["bytes"] for c in curve] == [
        model_cost.decode_step_bytes(TINY_SHAPE, b, 14) for b in (1, 2, 3, 4)]


def test_missing_points_no_spec_no_summary(tmp_path):
    sw = write_sweep(tmp_path / "sweep", values=(1, 2, 4), watts=None)
    shutil.rmtree(sw / "concurrency-4")
    (sw / "concurrency-2" / "summary.json").unlink()          # summarised from its records
    meta = json.loads((sw / "sweep.json").read_text())
    meta["search"] = {"kind": "max_rate_under_slo", "tolerance": 0.05, "probes": [{}] * 5,
                      "max_passing_rate": 3.0, "min_failing_rate": 3.1, "converged": True}
    (sw / "sweep.json").write_text(json.dumps(meta))
    md, page = report_sweep.write_sweep_report(sw)
    text = md.read_text()
    assert f"**Warning:** point 4: {sw / 'concurrency-4'} holds no records.jsonl" in text
    assert "| 2 | 12 | 0 | 16.937 |" in text
    assert "max passing rate 3.000 req/s, first failing 3.100 req/s, 5 probes, converged" in text
    if plots.available():
        assert page.read_text().count("data:image/png;base64,") == 2
        assert "roofline plot not shown: no device spec" in text
        assert ("J/token not plotted: energy unmeasured at every point (no power source "
                "configured)") in text


def test_write_any_rejects_other_directories(tmp_path):
    with pytest.raises(ValueError, match="neither a run directory"):
        run_report.write_any(tmp_path)
    (tmp_path / "sweep.json").write_text("{not json")
    with pytest.raises(ValueError, match="sweep.json: unreadable"):
        run_report.write_any(tmp_path)
