"""Concurrency stages on the Locust engine (loadgen/engine/core/stages.py): the users each
stage needs, shared over the workers; a real ``loadgen run --engine locust --workers 2``
against the calibration server, checked on the records' own order (no timing bounds)."""
from __future__ import annotations

import importlib.util
import json

import pytest

from analysis.contract import validate_run_dir
from loadgen.engine.core.stages import StageGate, active_users, even_split
from loadgen.record import read_records
from tests.support.procs import loadgen_cli, scenario_file

MS = 1_000_000


@pytest.mark.parametrize("counts", [[2, 1], [1, 2], [3, 3], [5], [0, 4], [2, 2, 1]])
def test_every_stage_runs_exactly_its_users_over_the_workers(counts):
    for c in range(0, sum(counts) + 3):
        per = [active_users(c, w, counts) for w in range(len(counts))]
        assert sum(per) == min(c, sum(counts))
        assert all(0 <= a <= u for a, u in zip(per, counts))
        if c <= sum(counts):             # interleaved: no worker two users ahead of another
            full = [a for a, u in zip(per, counts) if a < u]
            assert not full or max(per) - min(full) <= 1
    assert even_split(5, 2) == [3, 2] and even_split(1, 3) == [1, 0, 0]


def test_gate_is_the_native_closed_stages_rule():
    stages = [{"concurrency": 1, "start_s": 0.0, "duration_s": 1.0},
              {"concurrency": 3, "start_s": 1.0, "duration_s": 1.0},
              {"concurrency": 1, "start_s": 2.0, "duration_s": 0.5}]
    t0 = 10 * 1_000_000_000
    w0, w1 = StageGate(stages, t0, 0, [2, 1]), StageGate(stages, t0, 1, [2, 1])
    assert (w0.local_counts, w1.local_counts) == ([1, 2, 1], [0, 1, 0])
    s = 1_000_000_000
    assert w0.when(0, t0 - 5) == t0                       # before t0: at t0
    assert w0.when(0, t0 + 5) == t0 + 5                   # needed now
    assert w0.when(1, t0 + 5) == t0 + s                   # needed from stage 2 on
    assert w1.when(0, t0) == t0 + s
    assert w1.when(0, t0 + s + 7) == t0 + s + 7
    assert w1.when(0, t0 + 2 * s) is None                 # no stage from then on needs it
    assert w0.when(1, t0 + 2 * s) is None and w0.when(0, t0 + 2 * s + 1) == t0 + 2 * s + 1
    assert w0.end_ns == t0 + 2 * s + s // 2 and w0.when(0, w0.end_ns) is None


def _others_in_flight(recs: list[dict], r: dict) -> list[dict]:
    """The requests in flight at ``r``'s scheduled instant (r itself excluded)."""
    x = r["scheduled_at_ns"]
    return [o for o in recs if o is not r and o["sent_at_ns"] <= x < o["end_at_ns"]]


@pytest.mark.skipif(importlib.util.find_spec("locust") is None,
                    reason="the locust extra is not installed")
@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_staged_run_on_two_workers_follows_the_stages(tmp_path, calib_server):
    # stage 2 must be SEEN at 3 in flight (a liveness property: every one of its 3 users keeps
    # sending ~30 ms requests back to back); 2 s of it, not 0.6, so a worker that a busy box
    # stalls for a few hundred ms still overlaps the others: the check stays on the records'
    # own order, no timing bound
    stages = [{"concurrency": 1, "duration_s": 0.6}, {"concurrency": 3, "duration_s": 2.0},
              {"concurrency": 1, "duration_s": 0.4}]
    edges = (600 * MS, 2600 * MS, 3000 * MS)          # each stage's end, from t0
    tree = {"name": "st", "target": {"url": calib_server.url},
            "api": {"model": "calib-model", "probe": False,
                    "extra_body": {"calib": {"ttft_ms": 20, "itl_ms": 10}}},   # ~30 ms each
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 2}},
            "load": {"mode": "concurrency", "duration_s": 3.0, "warmup_requests": 1,
                     "stages": stages},
            "output": {"dir": str(tmp_path), "run_name": "st", "report": "none"}}
    out = loadgen_cli("run", scenario_file(tmp_path, tree, "st"), "--engine", "locust",
                      "--workers", "2", "--json", timeout_s=180)
    assert out.returncode == 0, out.stderr[-3000:]
    run = tmp_path / "st"
    meta = json.loads((run / "meta.json").read_text())
    lc = meta["locust"]
    assert lc["worker_status"] == {"0": "done", "1": "done"} and sum(lc["users_by_worker"]) == 3
    recs = read_records(run / "records.jsonl")
    assert all(r["status"] == "ok" for r in recs)
    m = [r for r in recs if r["phase"] == "measured"]
    t0 = meta["t0_ns"]
    by_stage: list[list[dict]] = [[], [], []]
    for r in m:
        off = r["scheduled_at_ns"] - t0
        assert 0 <= off < edges[2]                      # nothing sent after the last stage
        by_stage[0 if off < edges[0] else 1 if off < edges[1] else 2].append(r)
    assert all(by_stage)
    # one user in stage 1: global user 0, on worker 0; each request after the last one ended
    assert {r["worker"] for r in by_stage[0]} == {"0"}
    assert all(not _others_in_flight(m, r) for r in by_stage[0])
    # three users in stage 2, on both workers: never more than three in flight
    assert {r["worker"] for r in by_stage[1]} == {"0", "1"}
    assert max(len(_others_in_flight(m, r)) for r in by_stage[1]) + 1 <= 3
    assert max(len(_others_in_flight(m, r)) for r in by_stage[1]) + 1 == 3
    # one user again in stage 3: stage 3's requests never overlap one another
    assert {r["worker"] for r in by_stage[2]} == {"0"}
    assert all(not [o for o in _others_in_flight(m, r) if o in by_stage[2]] for r in by_stage[2])
    summary = json.loads((run / "summary.json").read_text())
    assert [s["concurrency"] for s in summary["stages"]] == [1, 3, 1]
    assert [s["requests"] for s in summary["stages"]] == [len(b) for b in by_stage]
    assert validate_run_dir(run) == []
