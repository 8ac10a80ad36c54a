"""A sweep that cannot fool: its plan is written up front, its values are checked before the
first point, a search stays within what a run can do, a garbled sweep.json is one line, and
frontier.json / sweep.json hold only finite numbers (loadgen/multirun/sweep.py, sweep_search.py)."""
import json
import math

import pytest
import yaml

from loadgen import cli
from loadgen.multirun.sweep import run_sweep
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import ScenarioError
from tests.loadgen.multirun.test_sweep import SERVER, base

CONC = {"mode": "concurrency", "concurrency": 1, "num_requests": 4}


def strict_json(path):
    def refuse(c):
        raise ValueError(f"{path.name}: {c} is not JSON")
    return json.loads(path.read_text(), parse_constant=refuse)


class Passing:
    """Every run passes; records the values it was asked to run."""

    def __init__(self, key="concurrency", stop_at=None, figures=None):
        self.key, self.stop_at, self.seen, self.figures = key, stop_at, [], figures or {}

    def __call__(self, sc):
        v = getattr(sc.load, self.key)
        self.seen.append(v)
        if v == self.stop_at:              # kill -9 stand-in: the sweep stops mid-point
            raise KeyboardInterrupt
        return {"verdict": {"valid": True, "reasons": []}, "requests_completed": 4,
                "goodput": 1.0, **self.figures}


def test_the_plan_is_recorded_before_the_first_point_and_the_end_marks_it_complete(tmp_path):
    sc = scenario_from_dict(base(tmp_path, CONC, {"param": "load.concurrency",
                                                  "values": [1, 2, 4]}))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sc, Passing(stop_at=2))
    sw = json.loads((tmp_path / "sweep-sw" / "sweep.json").read_text())
    assert sw["plan"]["values"] == [1, 2, 4] and sw["complete"] is False
    assert [p["value"] for p in sw["points"]] == [1]
    _, res = run_sweep(sc, Passing())
    assert res["complete"] is True and [p["value"] for p in res["points"]] == [1, 2, 4]


@pytest.mark.parametrize("load, values, bad", [
    (SERVER, [20, -1], "sweep.values[1]: -1"), (SERVER, [2e6], "sweep.values[0]: 2e+06"),
    (SERVER, [0], "sweep.values[0]: 0"),
    (CONC, [1, 200000], "sweep.values[1]: 200000")])
def test_every_value_is_checked_before_the_first_point(tmp_path, load, values, bad):
    param = "load.rate" if load is SERVER else "load.concurrency"
    sc = scenario_from_dict(base(tmp_path, load, {"param": param, "values": values}))
    fake = Passing(param.split(".")[1])
    with pytest.raises(ScenarioError) as e:
        run_sweep(sc, fake)
    assert str(e.value).startswith(bad) and "\n" not in str(e.value), str(e.value)
    assert fake.seen == []


def test_a_bad_value_is_one_line_and_exit_2_from_the_cli(tmp_path, capsys):
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump(base(tmp_path, SERVER, {"param": "load.rate", "values": [20, -1]})))
    assert cli.main(["sweep", str(y)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("loadgen: error: sweep.values[1]: -1") and "\n" not in err, err
    assert not (tmp_path / "sweep-sw" / "rate-20").exists()


def test_a_concurrency_search_stops_at_num_requests_and_says_so(tmp_path):
    sc = scenario_from_dict(base(tmp_path, dict(CONC, num_requests=20), {
        "param": "load.concurrency", "search": "max_concurrency_under_slo",
        "concurrency_low": 1, "max_probes": 30}))
    fake = Passing()
    _, res = run_sweep(sc, fake)
    s = res["search"]
    assert max(fake.seen) == 20 and fake.seen == [1, 2, 4, 8, 16, 20]
    assert s["max_passing_concurrency"] == 20 and s["capped"] == "capped at 20: load.num_requests"
    assert "capped at 20: load.num_requests" in s["stopped"]


def test_a_concurrency_search_stays_within_the_limit(tmp_path):
    sc = scenario_from_dict(base(tmp_path, {"mode": "concurrency", "concurrency": 1,
                                            "duration_s": 1}, {
        "param": "load.concurrency", "search": "max_concurrency_under_slo",
        "concurrency_low": 40000, "max_probes": 30}))
    fake = Passing()
    _, res = run_sweep(sc, fake)
    s = res["search"]
    assert fake.seen == [40000, 80000, 100000] and s["max_passing_concurrency"] == 100000
    assert s["capped"].startswith("capped at 100,000: load.concurrency")


def test_a_rate_search_stays_within_the_limit(tmp_path):
    sc = scenario_from_dict(base(tmp_path, SERVER, {
        "param": "load.rate", "search": "max_rate_under_slo", "rate_low": 300000.0,
        "max_probes": 30}))
    fake = Passing("rate")
    _, res = run_sweep(sc, fake)
    s = res["search"]
    assert fake.seen == [300000.0, 600000.0, 1e6] and s["max_passing_rate"] == 1e6
    assert s["capped"].startswith("capped at 1e+06: load.rate")


def test_frontier_and_sweep_json_hold_only_finite_numbers(tmp_path):
    sc = scenario_from_dict(base(tmp_path, CONC, {"param": "load.concurrency", "values": [1, 2]}))
    figs = {"interactivity_tok_s": {"p50": math.nan, "p10": math.inf},
            "output_throughput_per_accelerator": math.inf, "output_throughput": math.nan}
    d, _ = run_sweep(sc, Passing(figures=figs))
    fr = strict_json(d / "frontier.json")
    sw = strict_json(d / "sweep.json")
    assert all(p["x"] is None and not p["on_frontier"] for p in fr["points"])
    assert "not a finite number" in fr["excluded"][0]["reason"]
    assert sw["points"][0]["output_throughput"] is None


@pytest.mark.parametrize("text, why", [("{not json", "not valid JSON"),
                                       ('["a"]', "not a JSON object")])
def test_a_garbled_sweep_json_on_resume_is_one_line(tmp_path, text, why):
    sc = scenario_from_dict(base(tmp_path, CONC, {"param": "load.concurrency", "values": [1]}))
    (tmp_path / "sweep-sw").mkdir()
    (tmp_path / "sweep-sw" / "sweep.json").write_text(text)
    with pytest.raises(ScenarioError, match=f"sweep.json: {why}"):
        run_sweep(sc, Passing())
