"""max_concurrency_under_slo: integer bisection over full runs (loadgen/multirun/sweep_search.py
through loadgen/multirun/sweep.py), with a hand-written stand-in for the server; max_rate_under_slo
reports the goodput at its answer too."""
import json

import pytest

from loadgen.multirun.sweep import run_sweep
from loadgen.multirun.sweep_search import concurrency_search
from loadgen.scenario.loader import scenario_from_dict
from tests.loadgen.multirun.test_sweep import SERVER, Threshold, base

# num_requests bounds a concurrency search (no run has more in flight): large enough here
CONC = {"mode": "concurrency", "concurrency": 1, "num_requests": 1000}


class Users:
    """A run passes iff its concurrency is <= ``limit``; goodput = 10 x concurrency."""

    def __init__(self, limit):
        self.limit, self.seen = limit, []

    def __call__(self, sc):
        n = sc.load.concurrency
        self.seen.append(n)
        assert sc.sweep is None and sc.output.run_name == f"concurrency-{n}"
        return {"verdict": {"valid": n <= self.limit, "reasons": []}, "requests_completed": 4,
                "goodput": 10.0 * n}


@pytest.mark.parametrize("limit, low, high", [(13, 4, None), (13, 4, 5), (1, 8, None),
                                              (37, 1, None), (5, 5, None), (6, 6, 7)])
def test_bisection_finds_the_largest_passing_concurrency(tmp_path, limit, low, high):
    sc = scenario_from_dict(base(tmp_path, CONC, {
        "param": "load.concurrency", "search": "max_concurrency_under_slo",
        "concurrency_low": low, "concurrency_high": high, "max_probes": 30}))
    fake = Users(limit)
    d, res = run_sweep(sc, fake)
    s = res["search"]
    assert s["converged"] and s["stopped"] is None
    assert s["max_passing_concurrency"] == limit and s["min_failing_concurrency"] == limit + 1
    assert s["goodput_at_answer"] == 10.0 * limit
    assert [p["concurrency"] for p in s["probes"]] == fake.seen
    assert len(set(fake.seen)) == len(fake.seen)             # never the same run twice
    assert all(p["valid"] is (p["concurrency"] <= limit) for p in s["probes"])
    assert s["probes"][-1]["bracket_after"] == [limit, limit + 1] == s["bracket"][-1]
    saved = json.loads((d / "sweep.json").read_text())["search"]
    assert saved["max_passing_concurrency"] == limit and len(saved["probes"]) == len(fake.seen)
    assert {p["value"] for p in res["points"]} == set(fake.seen)


def test_nothing_passes_even_at_one(tmp_path):
    sc = scenario_from_dict(base(tmp_path, CONC, {
        "param": "load.concurrency", "search": "max_concurrency_under_slo",
        "concurrency_low": 4}))
    fake = Users(0)
    _, res = run_sweep(sc, fake)
    s = res["search"]
    assert fake.seen == [4, 2, 1] and s["max_passing_concurrency"] is None
    assert s["min_failing_concurrency"] == 1 and s["goodput_at_answer"] is None
    assert s["stopped"] == "no probed concurrency passed (not even 1)" and not s["converged"]


def test_max_probes_stops_the_search_and_says_why():
    seen = []
    res = concurrency_search(lambda n: seen.append(n) or True, 1, None, 4)
    assert seen == [1, 2, 4, 8] and res["max_passing_concurrency"] == 8
    assert res["min_failing_concurrency"] is None and "every probed concurrency passed" in res["stopped"]
    seen.clear()
    res = concurrency_search(lambda n: seen.append(n) or n <= 100, 1, 64, 3)
    assert seen == [1, 64, 128] and res["bracket"] == [[1, None], [64, None], [64, 128]]
    assert res["stopped"] == "max_probes 3 reached before the bracket closed"


def test_rate_search_reports_the_goodput_at_its_answer(tmp_path):
    sc = scenario_from_dict(base(tmp_path, SERVER, {
        "param": "load.rate", "search": "max_rate_under_slo", "rate_low": 2.0,
        "tolerance": 0.1, "max_probes": 20}))

    class WithGoodput(Threshold):
        def __call__(self, sc):
            return {**super().__call__(sc), "goodput": sc.load.rate / 2}
    _, res = run_sweep(sc, WithGoodput(7.0))
    s = res["search"]
    assert s["goodput_at_answer"] == s["max_passing_rate"] / 2


@pytest.mark.parametrize("sweep, field", [
    ({"param": "load.rate", "search": "max_concurrency_under_slo", "concurrency_low": 1},
     "sweep: search max_concurrency_under_slo sweeps param load.concurrency"),
    ({"param": "load.concurrency", "search": "max_concurrency_under_slo"},
     "sweep: search max_concurrency_under_slo needs 'concurrency_low'"),
    ({"param": "load.concurrency", "search": "max_concurrency_under_slo",
      "concurrency_low": 4, "concurrency_high": 4}, "sweep: concurrency_high must be >"),
    ({"param": "load.concurrency", "search": "max_concurrency_under_slo",
      "concurrency_low": 0}, "sweep.concurrency_low"),
])
def test_bad_concurrency_search_blocks(tmp_path, sweep, field):
    from loadgen.scenario.model import ScenarioError
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(base(tmp_path, CONC, sweep))
    assert str(e.value).startswith(field), str(e.value)
