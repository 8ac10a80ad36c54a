"""Sweep reports and frontier comparisons that cannot fool (issue 41 items 6, 12, 15, 23): a
killed sweep reads INCOMPLETE, a NaN in an older frontier.json is left out (no crash), an
all-INVALID sweep makes no frontier, a garbled sweep.json is one line. Hand-built sweeps."""
import json
import math
import shutil

import pytest

from analysis.metrics import frontier as f
from analysis.report import compare_frontier as cf
from analysis.report import sweep as report_sweep
from loadgen import cli
from tests.analysis.synth import write_sweep


@pytest.fixture
def killed(tmp_path):
    """A sweep of 1, 2, 4 killed -9 while running 4: two points listed, 4's directory torn."""
    sw = write_sweep(tmp_path / "sweep", values=(1, 2), watts=None)
    meta = json.loads((sw / "sweep.json").read_text())
    meta.update(plan={"values": [1, 2, 4], "points": 3}, complete=False)
    (sw / "sweep.json").write_text(json.dumps(meta))
    torn = sw / "concurrency-4"
    torn.mkdir()
    shutil.copy(sw / "concurrency-2" / "records.jsonl", torn / "records.jsonl")
    return sw


def test_a_killed_sweep_reads_incomplete_with_its_missing_and_torn_points(killed, capsys):
    md, _ = report_sweep.write_sweep_report(killed, with_plots=False)
    text = md.read_text()
    head = ("INCOMPLETE sweep: 2 of 3 planned point(s) done; not run: 4; half-written: "
            "concurrency-4 (records.jsonl without summary.json)")
    assert head in text and text.index(head) < text.index("## Points (measured)")
    assert "2 of 3 planned point(s) with runs" in text
    assert cli.main(["report", str(killed), "--no-plots"]) == 0
    assert head in capsys.readouterr().err


def test_a_finished_sweep_is_not_flagged(tmp_path):
    sw = write_sweep(tmp_path / "sweep", values=(1, 2), watts=None)     # before plans existed
    text = report_sweep.write_sweep_report(sw, with_plots=False)[0].read_text()
    assert "INCOMPLETE" not in text
    meta = json.loads((sw / "sweep.json").read_text())
    meta.update(plan={"values": [1, 2], "points": 2}, complete=True)
    (sw / "sweep.json").write_text(json.dumps(meta))
    assert report_sweep.status_line(sw) == "sweep complete: 2 of 2 planned point(s) done"


def test_a_nan_in_an_older_frontier_json_is_left_out_not_a_crash(tmp_path):
    sw = write_sweep(tmp_path / "sweep", values=(1, 2), watts=None)
    rows = [{"value": v, "run_dir": f"concurrency-{v}", "valid": True,
             "interactivity_tok_s": {"p50": x}, "output_throughput_per_accelerator": y}
            for v, x, y in ((1, math.nan, 50.0), (2, 40.0, math.inf))]
    fr = f.frontier(rows, "load.concurrency")
    assert [p["x"] for p in fr["points"]] == [None, 40.0] and fr["line"] == []
    assert all("not a finite number" in e["reason"] for e in fr["excluded"])
    json.dumps(fr, allow_nan=False)
    old = {**fr, "points": [{**fr["points"][0], "x": math.nan, "y": 50.0},
                            {**fr["points"][1], "y": math.inf}], "line": [[math.nan, 50.0]]}
    (sw / "frontier.json").write_text(json.dumps(old))       # as the old writer did: NaN text
    md, page = report_sweep.write_sweep_report(sw, with_plots=True)
    assert "Throughput–interactivity frontier" in md.read_text()
    assert "nan" not in md.read_text().split("Throughput–interactivity frontier")[1].split("##")[0]


def _two(tmp_path, valid_a):
    out = []
    for name, rows in (("a", [(1, 100, 50), (4, 40, 120)]), ("b", [(1, 120, 40), (8, 30, 200)])):
        d = write_sweep(tmp_path / name, values=(1, 2), watts=None)
        rs = [{"value": v, "run_dir": f"concurrency-{v:g}", "valid": valid_a if name == "a"
               else True, "interactivity_tok_s": {"p50": x},
               "output_throughput_per_accelerator": y} for v, x, y in rows]
        (d / "frontier.json").write_text(json.dumps(f.frontier(rs, "load.concurrency")))
        out.append(d)
    return out


def test_an_all_invalid_sweep_makes_no_frontier_and_no_headline(tmp_path, capsys):
    a, b = _two(tmp_path, valid_a=False)
    at = cf.compare_frontiers([a, b], at=70)["at"]
    assert at["ahead"] is None and "a has no VALID point (all 2 INVALID)" in at["refused"]
    assert cli.main(["compare", str(a), str(b), "--at-interactivity", "70"]) == 2
    cap = capsys.readouterr()
    assert "ahead by" not in cap.out
    assert cap.err.strip().startswith("loadgen: error: --at-interactivity: fewer than two "
                                      "frontiers reach it: a has no VALID point (all 2 INVALID)")


def test_a_mixed_sweep_compares_on_its_valid_points_and_says_so(tmp_path):
    a, b = _two(tmp_path, valid_a=True)
    fr = json.loads((a / "frontier.json").read_text())
    fr["points"][1]["valid"] = False                      # c=4 broke the SLO
    (a / "frontier.json").write_text(json.dumps(fr))
    at = cf.compare_frontiers([a, b], at=100)["at"]
    assert at["values"][0]["y"] == 50.0                   # only c=1 left on a's frontier
    assert "INVALID points left out of the frontiers: a 4" in cf.ahead_line(at)


@pytest.mark.parametrize("text, why", [
    ("{not json", "unreadable: not valid JSON (Expecting property name enclosed in double "
                  "quotes, line 1 column 2)"),
    ('{"points": [{"value": "x", "run_dir": "concurrency-1"}]}', "points[0].value: not a number"),
    ('{"points": [{"value": 1, "run_dir": "../elsewhere"}]}', "points[0].run_dir: not a directory"),
])
def test_a_garbled_sweep_json_is_one_line(tmp_path, capsys, text, why):
    a = write_sweep(tmp_path / "a", values=(1,), watts=None)
    b = write_sweep(tmp_path / "b", values=(1,), watts=None)
    (a / "sweep.json").write_text(text)
    assert cli.main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{a / 'sweep.json'}: {why}" in err, err
    assert cli.main(["report", str(a), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"loadgen: error: {a / 'sweep.json'}: {why}") and "\n" not in err, err
