"""Staged and trace schedules, and the scenario keys that ask for them."""
import numpy as np
import pytest

from loadgen.scenario.model import ScenarioError

from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.schedule import NS, build_schedule, staged_offsets_ns


def test_stages_run_back_to_back_at_their_own_rates():
    off, table = staged_offsets_ns(np.random.default_rng(0), "constant", [(2.0, 3.0), (4.0, 2.0)])
    # stage 0: 0, .5, 1, 1.5, 2, 2.5 s (6 sends at 2/s); stage 1 from 3 s: 8 sends at 4/s
    assert len(off) == 6 + 8
    assert np.all(np.diff(off) > 0)
    assert off.tolist()[:7] == [0, NS // 2, NS, 3 * NS // 2, 2 * NS, 5 * NS // 2, 3 * NS]
    assert off.tolist()[-1] == 3 * NS + 7 * NS // 4
    assert table == [{"index": 0, "rate": 2.0, "start_s": 0.0, "duration_s": 3.0},
                     {"index": 1, "rate": 4.0, "start_s": 3.0, "duration_s": 2.0}]
    cut, _ = staged_offsets_ns(np.random.default_rng(0), "constant", [(2.0, 3.0), (4.0, 2.0)], n=7)
    assert cut.tolist() == off[:7].tolist()


def test_poisson_stages_switch_at_the_stated_time():
    off, _ = staged_offsets_ns(np.random.default_rng(1), "poisson", [(5.0, 20.0), (50.0, 10.0)])
    first = off[off < 20 * NS]
    second = off[off >= 20 * NS]
    assert 60 < len(first) < 140 and 400 < len(second) < 600   # ~100 and ~500 expected
    assert second[0] >= 20 * NS and second[0] - 20 * NS < NS   # the first gap of stage 1 is short


def scenario(load, workload=None):
    return scenario_from_dict({"name": "x", "target": {"url": "http://127.0.0.1:1"},
                               "load": load, **({"workload": workload} if workload else {})})


def test_scenario_stages_build_a_staged_schedule():
    sc = scenario({"mode": "server", "stages": [{"rate": 2, "duration_s": 3},
                                                {"rate": 4, "duration_s": 2}],
                   "arrival": "constant", "duration_s": 5})
    s = build_schedule(sc.load, 0)
    assert s.mode == "server" and s.count == 14 and s.describe()["stages"][1]["start_s"] == 3.0


@pytest.mark.parametrize("load,msg", [
    ({"mode": "server", "rate": 2, "stages": [{"rate": 1, "duration_s": 1}], "num_requests": 3},
     "give 'rate' or 'stages', not both"),
    ({"mode": "concurrency", "stages": [{"rate": 1, "duration_s": 1}],
      "num_requests": 3}, "each stage of mode concurrency needs 'concurrency'"),
    ({"mode": "concurrency", "concurrency": 2, "stages": [{"concurrency": 1, "duration_s": 1}],
      "num_requests": 3}, "give 'concurrency' or 'stages', not both"),
    ({"mode": "offline", "stages": [{"rate": 1, "duration_s": 1}], "num_requests": 3},
     "'stages' needs mode server or concurrency"),
    ({"mode": "server", "stages": [{"rate": 0, "duration_s": 1}], "num_requests": 3},
     "load.stages.0.rate"),
    ({"mode": "trace", "num_requests": 3}, "load.mode trace and workload.source trace go together"),
])
def test_bad_stage_and_trace_keys_name_the_field(load, msg):
    with pytest.raises(ScenarioError, match=msg):
        scenario(load)


def test_trace_schedule_takes_the_trace_offsets():
    sc = scenario({"mode": "trace", "time_scale": 0.5, "num_requests": 3},
                  {"source": "trace", "path": "x.jsonl", "format": "mooncake"})
    s = build_schedule(sc.load, 0, np.array([0, 10, 20]))
    assert s.mode == "trace" and s.offsets_ns.tolist() == [0, 10, 20]
    assert s.describe()["time_scale"] == 0.5 and s.describe()["scheduled_count"] == 3
    with pytest.raises(ValueError, match="needs the trace's offsets"):
        build_schedule(sc.load, 0)
