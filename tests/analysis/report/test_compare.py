"""`loadgen compare`: side by side when comparable, refused (naming the fields) when not."""
import json

from analysis.report import compare
from loadgen import cli
from tests.analysis.synth import closed_loop, jax_sut, scenario_yaml, server_meta, write_run, \
    write_sweep


def _run(root, name, conc=1, yaml_edit=lambda y: y, **meta_over):
    meta = server_meta(**{"mode": "concurrency", "in_flight_cap": conc, "min_queries": 0,
                          "min_duration_s": 0, "slo": {"ttft_ms": 100.0, "tpot_ms": 30.0},
                          **meta_over})
    d = write_run(root / name, closed_loop(conc, 4, itl_ms=10 + 2 * conc), meta, jax_sut())
    (d / "scenario.yaml").write_text(yaml_edit(scenario_yaml(conc, 4 * conc, name)))
    return d


def test_points_of_one_scenario_compare_and_list_what_differs(tmp_path):
    a, b = _run(tmp_path, "a", 1), _run(tmp_path, "b", 2)
    res = compare.compare([a, b])
    assert res["comparable"] and res["refusals"] == []
    assert "load.concurrency: 1 vs 2" in res["differences"]
    assert "load.num_requests: 4 vs 8" in res["differences"]
    rows = {r[0]: r[1:] for r in res["metrics"]}
    # TPOT = itl: 12 ms at concurrency 1, 14 ms at 2 -> +16.7 %
    assert rows["TPOT p50 (ms)"] == ["12.000", "14.000 (+16.7%)"]
    assert rows["completed / failed"] == ["4 / 0", "8 / 0"]
    assert rows["verdict"] == ["VALID", "VALID"]


def test_refused_when_workload_mode_or_slo_differ(tmp_path):
    a = _run(tmp_path, "a")
    longer = _run(tmp_path, "w", yaml_edit=lambda y: y.replace("value: 8}", "value: 16}"))
    res = compare.compare([a, longer])
    assert not res["comparable"]
    assert res["refusals"] == ["workload differs: output_tokens.value: 8 vs 16"]
    other_mode = _run(tmp_path, "m", mode="offline")
    assert compare.compare([a, other_mode])["refusals"] == [
        "scenario type differs: mode: 'concurrency' vs 'offline'"]
    strict = _run(tmp_path, "s", slo={"ttft_ms": 100.0, "tpot_ms": 20.0})
    assert compare.compare([a, strict])["refusals"] == ["slo differs: tpot_ms: 30.0 vs 20.0"]
    # two dataset files: the path and the content hash both differ
    d1, d2 = tmp_path / "p1.jsonl", tmp_path / "p2.jsonl"
    d1.write_text('{"prompt": "a"}\n')
    d2.write_text('{"prompt": "b"}\n')
    runs = [_run(tmp_path, f"j{i}", yaml_edit=lambda y, p=p: y.replace(
        "source: synthetic", f"source: jsonl, path: {p}")) for i, p in ((1, d1), (2, d2))]
    refused = compare.compare(runs)["refusals"]
    assert [r.split(":")[1].strip() for r in refused] == ["dataset_sha256", "path"]
    d2.write_text('{"prompt": "a"}\n')
    (runs[1] / "scenario.yaml").write_text((runs[0] / "scenario.yaml").read_text())
    assert compare.compare(runs)["comparable"]


def test_unrecorded_conditions_are_refused(tmp_path):
    a = _run(tmp_path, "a")
    bare = write_run(tmp_path / "bare", closed_loop(1, 4), {"mode": "concurrency"}, None)
    res = compare.compare([a, bare])
    assert "workload not recorded for bare: cannot check it" in res["refusals"]
    assert "slo differs: tpot_ms: 30.0 vs None" in res["refusals"]


def test_cli_compare(tmp_path, capsys):
    sw = write_sweep(tmp_path / "sweep", values=(1, 2))
    out = tmp_path / "cmp.html"
    assert cli.main(["compare", str(sw), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| figure | concurrency-1 | concurrency-2 |" in text
    assert "load.concurrency: 1 vs 2" in text
    assert out.read_text().startswith("<!DOCTYPE html>")
    w = _run(tmp_path, "w", yaml_edit=lambda y: y.replace("value: 8}", "value: 16}"))
    assert cli.main(["compare", str(sw / "concurrency-1"), str(w), "--json"]) == 2
    cap = capsys.readouterr()
    assert json.loads(cap.out)["comparable"] is False
    assert cap.err.strip().splitlines() == [
        "loadgen: error: compare: refusing to compare: workload differs: output_tokens.value: "
        "8 vs 16"]
    assert cli.main(["compare", str(w)]) == 2
    assert "at least two runs" in capsys.readouterr().err
    assert cli.main(["compare", str(w), str(tmp_path / "nope")]) == 2
    assert "nope: not a run directory" in capsys.readouterr().err
