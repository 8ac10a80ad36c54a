"""meta.json is made from (Prepared, Outcome) only: the same keys whichever engine reports."""
import dataclasses

from analysis.contract import RunMeta
from loadgen.run.meta import run_meta, write_meta
from loadgen.run.outcome import Outcome, prepare
from loadgen.run.runner import Run
from loadgen.scenario.loader import scenario_from_dict


def scenario(tmp_path, load=None):
    return scenario_from_dict({
        "name": "t", "target": {"url": "http://127.0.0.1:1"},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 4}},
        "load": load or {"mode": "server", "rate": 5, "num_requests": 6},
        "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}})


def test_prepared_once_names_the_run_dir_and_holds_the_plan(tmp_path):
    prep = prepare(scenario(tmp_path))
    assert prep.run_dir == tmp_path / "run" and not prep.run_dir.exists()   # checked, not made
    assert prep.schedule.count == 6 and prep.describe()["schedule"]["scheduled_count"] == 6
    run = Run(prep.sc, prepared=prep)              # an engine takes it as it is
    assert (run.run_dir, run.plan, run.schedule) == (prep.run_dir, prep.plan, prep.schedule)


def test_meta_json_is_made_from_the_two(tmp_path):
    prep = prepare(scenario(tmp_path))
    out = Outcome("native", target_url="http://127.0.0.1:1", model="m", t0_ns=5, end_ns=9,
                  in_flight_cap=None, records_written=3, client_load={"cpu_util": 0.25},
                  interrupted="SIGINT", probe={"status": "ok", "warnings": [],
                                               "dropped_fields": []})
    prep.run_dir.mkdir()
    meta = write_meta(prep.run_dir, run_meta(prep, out))
    assert RunMeta.problems(meta, "meta.json") == []
    assert (meta["t0_ns"], meta["end_ns"], meta["records_written"]) == (5, 9, 3)
    assert meta["interrupted"] is True and meta["interrupt_signal"] == "SIGINT"
    assert meta["client_cpu"] == 0.25 and meta["mode"] == "server" and meta["rate"] == 5
    assert meta["schedule"] == prep.schedule.describe() and meta["engine"] == "native"
    assert "locust" not in meta and meta["run_dir"] == str(prep.run_dir)


def test_both_engines_outcomes_give_the_same_keys(tmp_path):
    prep = prepare(scenario(tmp_path, {"mode": "concurrency", "concurrency": 2,
                                       "num_requests": 4}))
    native = run_meta(prep, Outcome("native", in_flight_cap=2))
    locust = run_meta(prep, dataclasses.replace(Outcome("native", in_flight_cap=2),
                                                engine="locust", in_flight_cap=3,
                                                locust={"workers": 1, "users": 3}))
    assert set(locust) - set(native) == {"locust"} and set(native) <= set(locust)
    assert (locust["engine"], locust["in_flight_cap"], native["in_flight_cap"]) == ("locust", 3, 2)
    assert native["client_load"] == {} and native["client_cpu"] is None   # not measured: None
    assert RunMeta.problems(RunMeta.dump(locust), written=True) == []
