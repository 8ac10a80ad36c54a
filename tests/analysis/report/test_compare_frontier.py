"""Sweeps compared by their frontiers (analysis/report/compare_frontier.py, ``loadgen compare
SWEEP SWEEP``) on hand-built sweep directories."""
import json

import pytest

from analysis.metrics import frontier as f
from analysis.report import compare_frontier as cf
from analysis.report import plots
from loadgen import cli
from tests.analysis.synth import write_sweep


def _row(v, x, y):
    return {"value": v, "run_dir": f"concurrency-{v:g}", "valid": True,
            "interactivity_tok_s": {"p50": x}, "output_throughput_per_accelerator": y}


@pytest.fixture
def two(tmp_path):
    a = write_sweep(tmp_path / "a", values=(1, 2), watts=None)
    b = write_sweep(tmp_path / "b", values=(1, 2), watts=None)
    for d, rows in ((a, [_row(1, 100, 50), _row(4, 40, 120)]),
                    (b, [_row(1, 120, 40), _row(8, 30, 200)])):
        (d / "frontier.json").write_text(json.dumps({**f.frontier(rows, "load.concurrency"),
                                                     "slo": {"tpot_ms": 25.0}}))
    return a, b


def test_who_is_ahead_at_a_speed(two, capsys):
    a, b = two
    res = cf.compare_frontiers([a, b], at=70)
    assert res["comparable"] and res["sweeps"] == ["a", "b"]
    at = res["at"]
    yb = 200 + (40 - 200) * 40 / 90
    assert at["ahead"] == "b" and at["by"] == pytest.approx(yb - 85.0)
    line = cf.ahead_line(at)
    assert line.startswith(f"at 70 tok/s per user: b is ahead by {yb - 85:.1f} output tok/s "
                           "per accelerator")
    out = a.parent / "cmp.html"
    assert cli.main(["compare", str(a), str(b), "--at-interactivity", "70", "--out",
                     str(out)]) == 0
    text = capsys.readouterr().out
    assert line in text and "| c=4 | 40.0 | 120.0 | yes | VALID | concurrency-4 |" in text
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["at"]["ahead"] == "b"
    if plots.available():
        assert out.read_text().count("data:image/png;base64,") == 1
        assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_a_sweep_before_frontier_json_is_read_from_its_summaries(tmp_path):
    sw = write_sweep(tmp_path / "old", values=(1, 2), watts=None)     # no frontier.json
    fr = cf.frontier_of(sw)
    # the points' summaries have the per-user speed; their sut.json has no accelerators
    assert all(p["x"] is not None and p["y"] is None for p in fr["points"])
    assert [e["missing"] for e in fr["excluded"]] == ["output_throughput_per_accelerator"] * 2
    assert "written before the key" in fr["excluded"][0]["reason"]
    assert fr["slo"]["tpot_ms"] == 30.0


def test_different_workloads_are_refused(two, capsys):
    a, b = two
    y = b / "concurrency-1" / "scenario.yaml"
    y.write_text(y.read_text().replace("value: 8}", "value: 16}"))
    res = cf.compare_frontiers([a, b], at=70)
    assert not res["comparable"] and res["at"] is None
    assert res["refusals"] == ["workload differs: output_tokens.value: 8 vs 16"]
    assert cli.main(["compare", str(a), str(b)]) == 2
    assert capsys.readouterr().err.strip() == ("loadgen: error: compare: refusing to compare: "
                                               "workload differs: output_tokens.value: 8 vs 16")

