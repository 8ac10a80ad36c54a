"""A workload.dataset of regex rows, graded off the sending loop (loadgen.client.accuracy): the
calibration server answers 31 "a"s (calib answer json), the backtracking pattern "(a+)+b" that
froze the sender under Python's re (2**31 steps: minutes, Ctrl-C ignored) is matched by RE2 on
the grading thread, and the run completes with every record graded: wrong for "(a+)+b", right
for "^a+$", with one process, --procs 2 and the Locust engine."""
from __future__ import annotations

import importlib.util
import json

import pytest

from servers.calib import CalibrationServer
from tests.loadgen.run.test_accuracy_run import run as run_accuracy


@pytest.fixture(scope="module")
def server():
    with CalibrationServer(ttft_ms=2, itl_ms=1) as s:
        yield s


@pytest.fixture()
def dataset(tmp_path):
    p = tmp_path / "regex.jsonl"
    p.write_text(json.dumps({"prompt": "say a", "expected": {"regex": "(a+)+b"}}) + "\n"
                 + json.dumps({"prompt": "say a", "expected": {"regex": "^a+$"}}) + "\n")
    return p


ENGINES = [("one", ()), ("procs", ("--procs", "2"))]
if importlib.util.find_spec("locust") is not None:
    ENGINES.append(("locust", ("--engine", "locust")))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("name,extra", ENGINES, ids=[e[0] for e in ENGINES])
def test_regex_answers_are_graded_on_every_engine(server, tmp_path, dataset, name, extra):
    d, recs, s, _ = run_accuracy(server.url, tmp_path, name, "--set",
                                 f"workload.dataset={{path: {dataset}}}", *extra,
                                 calib={"answer": "json", "json": "a" * 31}, n=6)
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs)
    assert sorted(r["correct"] for r in recs) == [False] * 3 + [True] * 3
    a = s["accuracy"]
    assert (a["n"], a["correct"]) == (6, 3)
