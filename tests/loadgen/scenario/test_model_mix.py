"""api.models / api.model_assignment (loadgen.scenario.model_mix): the pure, seeded choice of a
model per request id, and the bad input that stops a run with one line and exit 2."""
import collections

import pytest

from loadgen import cli
from loadgen.client.request import Shape
from loadgen.record import Record
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import ScenarioError
from loadgen.scenario.model_mix import ModelMix, scaled, smooth_cycle


def tree(**api):
    return {"target": {"url": "http://127.0.0.1:9"}, "api": api,
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 4}}


def test_round_robin_spreads_each_model_over_the_cycle():
    m = ModelMix(["a", "b"], [1, 1], "round_robin", 0)
    assert [m.pick(i) for i in range(6)] == ["a", "b"] * 3
    w = ModelMix(["a", "b", "c"], [2, 1, 1], "round_robin", 0)
    assert [w.pick(i) for i in range(8)] == ["a", "b", "c", "a"] * 2
    assert smooth_cycle(scaled([0.3, 0.7])) == [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]   # 3 : 7 in 10
    assert scaled([1e9, 1]) == [1000, 1] and scaled([2.5, 5]) == [1, 2]   # short cycles, exact ratios


def test_random_is_seeded_pure_and_weighted():
    a = ModelMix(["a", "b"], [3, 1], "random", 7)
    again = ModelMix(["a", "b"], [3, 1], "random", 7)
    picks = [a.pick(i) for i in range(4000)]
    assert picks == [again.pick(i) for i in range(4000)]           # same seed, same ids
    assert picks[::-1] == [a.pick(i) for i in reversed(range(4000))]   # pure: order does not matter
    assert 0.70 < collections.Counter(picks)["a"] / 4000 < 0.80
    other = ModelMix(["a", "b"], [3, 1], "random", 8)
    assert picks != [other.pick(i) for i in range(4000)]


def test_scenario_seed_reaches_the_mix_and_the_body():
    sc = scenario_from_dict({**tree(models=[{"name": "a"}, {"name": "b", "weight": 3}],
                                    model_assignment="random"),
                             "workload": {"seed": 4}})
    assert sc.api.mix.seed == 5 and sc.api.mix.names == ["a", "b"]      # load.seed, else workload.seed + 1
    assert sc.api.first_model == "a"
    shape = Shape(sc.api, "a", None)
    for rid in range(20):
        rec = Record(id=rid, phase="measured")
        shape.prepare(rec, "hi", None)
        assert rec.model == sc.api.mix.pick(rid)
        assert f'"model":"{rec.model}"'.encode() in shape.body("hi", 4, None, None, rec.model)
    one = Shape(scenario_from_dict(tree(model="x")).api, "x", None)
    rec = Record(id=0, phase="measured")
    one.prepare(rec, "hi", None)
    assert rec.model is None and b'"model":"x"' in one.body("hi", 4)


@pytest.mark.parametrize("api,needle", [
    ({"models": [{"name": "a", "weight": 0}]}, "api.models.0.weight: must be > 0, got 0"),
    ({"models": [{"name": "a", "weight": -1}]}, "api.models.0.weight: must be > 0, got -1"),
    ({"model": "a", "models": [{"name": "b"}]}, "models: give api.model (one model) or api.models"),
    ({"models": []}, "api.models: give at least one"),
    ({"models": [{"name": "a"}, {"name": "a"}]}, "api.models: 'a' is listed twice"),
    ({"models": [{"name": "a"}], "model_assignment": "weighted"}, "api.model_assignment"),
    ({"models": [{"name": "a", "weigth": 2}]}, "api.models.0.weigth: unknown key"),
])
def test_bad_models_are_one_line(api, needle):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tree(**api))
    assert "\n" not in str(e.value) and needle in str(e.value), str(e.value)


def test_cli_weight_zero_is_one_line_exit_2(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text('target: {url: "http://127.0.0.1:9"}\n'
                 "api: {models: [{name: a, weight: 1}, {name: b, weight: 0}]}\n"
                 "load: {mode: concurrency, concurrency: 2, num_requests: 4}\n")
    assert cli.main(["run", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "api.models.1.weight" in err and "must be > 0" in err
