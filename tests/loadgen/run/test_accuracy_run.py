"""`loadgen run scenarios/accuracy.yaml` as a user runs it, against the real calibration server
(127.0.0.1), which answers the builtin arithmetic right or wrong on demand (calib answer
solve | solve_wrong): every answer right → fraction 1, every one wrong → 0, every one cut by
max_tokens → not checkable (null), with one process, --procs 2 and the Locust engine; the cost
block priced from the measured window; report and console rows. Slow: against the random-weight
JAX server the fraction is ~0 and the report says the check ran."""
from __future__ import annotations

import importlib.util
import json
from functools import partial
from pathlib import Path

import pytest

from analysis.contract import validate_run_dir
from loadgen.record import read_records
from servers.calib import CalibrationServer
from tests.support.procs import loadgen_cli

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios/accuracy.yaml"


@pytest.fixture(scope="module")
def server():
    with CalibrationServer(ttft_ms=2, itl_ms=1) as s:
        yield s


cli = partial(loadgen_cli, timeout_s=300)


def run(url: str, tmp_path: Path, name: str, *extra: str, calib=None, n: int = 12):
    sets = [f"target.url={url}", f"load.num_requests={n}", "load.concurrency=2",
            "api.ready_timeout_s=0", f"output.dir={tmp_path}", f"output.run_name={name}",
            "output.report=text"]
    if calib is not None:
        sets += ["api.model=calib-model", "api.extra_body=" + json.dumps({"calib": calib})]
    r = cli("run", SCENARIO, *[x for s in sets for x in ("--set", s)], *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    d = tmp_path / name
    return (d, read_records(d / "records.jsonl"),
            json.loads((d / "summary.json").read_text()), r.stdout)


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("answer,fraction", [("solve", 1.0), ("solve_wrong", 0.0)])
def test_right_and_wrong_answers_give_fraction_one_and_zero(server, tmp_path, answer, fraction):
    d, recs, s, out = run(server.url, tmp_path, answer, calib={"answer": answer})
    assert len(recs) == 12 and all(r["status"] == "ok" for r in recs)
    assert {r["correct"] for r in recs} == {fraction == 1.0}
    assert all(r["finish_reason"] == "stop" and r["output_text"] is None for r in recs)
    a = s["accuracy"]
    assert (a["n"], a["correct"], a["fraction"]) == (12, 12 if fraction else 0, fraction)
    lo, hi = a["ci95"]
    assert lo <= fraction <= hi and 0 < hi - lo < 0.5
    c = s["cost"]       # 2.5 $/h × 1 accelerator over the measured window
    assert c["window_usd"] == pytest.approx(s["duration_s"] / 3600 * 2.5)
    out_tok = sum(r["output_tokens"] for r in recs)
    assert c["usd_per_million_output_tokens"] == pytest.approx(c["window_usd"] / out_tok * 1e6)
    assert c["energy_usd_per_million_output_tokens"] is None      # no power source
    assert "accuracy: " in out and "cost: $" in out               # the console rows
    report = (d / "report.md").read_text()
    assert "## Accuracy beside speed" in report and "## Cost" in report
    assert f"{12 if fraction else 0} of 12 checkable answers right" in report
    assert validate_run_dir(d) == []


def test_answers_cut_by_max_tokens_are_not_checkable(server, tmp_path):
    # one token: every answer (at least two digits) is cut while it could still be right
    d, recs, s, _ = run(server.url, tmp_path, "cut", "--set",
                        "workload.output_tokens={dist: fixed, value: 1}", calib={"answer": "solve"})
    assert all(r["finish_reason"] == "length" and r["correct"] is None for r in recs)
    a = s["accuracy"]
    assert (a["n"], a["fraction"], a["ci95"]) == (0, None, None)
    assert a["unchecked"]["cut_by_max_tokens"] == 12 and "cut by max tokens" in a["reason"]


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_two_sender_processes_grade_every_answer(server, tmp_path):
    d, recs, s, _ = run(server.url, tmp_path, "procs", "--procs", "2",
                        calib={"answer": "solve"})
    assert {r["worker"] for r in recs} == {"0", "1"}
    assert all(r["correct"] is True for r in recs) and s["accuracy"]["fraction"] == 1.0


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.skipif(importlib.util.find_spec("locust") is None, reason="the locust extra")
def test_the_locust_engine_grades_every_answer(server, tmp_path):
    d, recs, s, _ = run(server.url, tmp_path, "locust", "--engine", "locust",
                        calib={"answer": "solve_wrong"}, n=6)
    assert len(recs) == 6 and all(r["correct"] is False for r in recs)
    assert s["accuracy"]["fraction"] == 0.0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_random_weight_model_scores_about_zero_and_the_report_says_the_check_ran(
        jax_url, tmp_path):
    d, recs, s, out = run(jax_url, tmp_path, "jax", "--set", "workload.tokenizer=bytes",
                          "--set", "workload.output_tokens={dist: fixed, value: 4}", n=8)
    a = s["accuracy"]
    assert a["ran"] and a["requests"] == 8
    assert a["n"] >= 4 and a["fraction"] is not None and a["fraction"] <= 0.25
    assert "checkable answers right" in (d / "report.md").read_text()
    assert "accuracy: " in out
