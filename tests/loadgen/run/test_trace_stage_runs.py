"""Trace replay and staged load through the runner, against the calibration server."""
import json

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.trace import TracePrompts, TraceRow
from loadgen.scenario.tokens import ByteCounter

MS = 1_000_000


def base(calib_server, tmp_path, workload, load):
    return {"name": "t", "target": {"url": calib_server.url},
            "api": {"extra_body": {"calib": {"ttft_ms": 2, "itl_ms": 1}}},
            "workload": {"tokenizer": "bytes", **workload}, "load": load,
            "output": {"dir": str(tmp_path), "run_name": "run", "report": "text"}}


def test_trace_replay_sends_at_the_trace_times_with_shared_blocks(calib_server, tmp_path):
    rows = [{"timestamp": 1000, "input_length": 20, "output_length": 3, "hash_ids": [7, 8, 9]},
            {"timestamp": 1100, "input_length": 24, "output_length": 4, "hash_ids": [7, 8, 5]},
            {"timestamp": 1400, "input_length": 12, "output_length": 2, "hash_ids": [6, 8]}]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sc = scenario_from_dict(base(calib_server, tmp_path,
                                 {"source": "trace", "path": str(path), "block_tokens": 8},
                                 {"mode": "trace", "time_scale": 0.5, "num_requests": 3,
                                  "warmup_requests": 2}))
    res = run_scenario(sc)
    recs = sorted(read_records(res.run_dir / "records.jsonl"), key=lambda r: r["id"])
    meta = json.loads((res.run_dir / "meta.json").read_text())
    measured = [r for r in recs if r["phase"] == "measured"]
    # scheduled offsets from t0 = (timestamp − first) × time_scale: 0, 50, 200 ms
    assert [(r["scheduled_at_ns"] - meta["t0_ns"]) // MS for r in measured] == [0, 50, 200]
    assert [r["status"] for r in recs] == ["ok"] * 5
    assert [r["requested_output_tokens"] for r in measured] == [3, 4, 2]
    assert [r["workload_prompt_tokens"] for r in measured] == [20, 24, 12]
    assert meta["mode"] == "trace" and meta["schedule"]["time_scale"] == 0.5
    assert meta["workload"]["trace"]["rows"] == 3
    # the prompts the run sent: equal leading ids (7, 8) = identical leading 16 bytes
    tp = TracePrompts(ByteCounter(), 0, 8)
    p = [tp.prompt(TraceRow(0, 1, r["input_length"], tuple(r["hash_ids"])), i)[0]
         for i, r in enumerate(rows)]
    assert p[0][:16] == p[1][:16] and p[0][16:20] != p[1][16:20] and p[2][:8] != p[0][:8]
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert summary["headline_ttft"] == "ttft_from_scheduled_ms"


def test_warmup_of_a_trace_sends_no_trace_block(tmp_path):
    from loadgen.scenario.model import Workload
    from loadgen.scenario.workload import build_workload
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps({"timestamp": 0, "input_length": 16, "output_length": 3,
                                "hash_ids": [1, 2]}) + "\n")
    plan = build_workload(Workload(source="trace", path=str(path), block_tokens=8,
                                   tokenizer="bytes"))
    measured = plan.take(1)[0]
    warm = next(plan.warmup_specs())
    assert measured.prompt_tokens == warm.prompt_tokens == 16 and warm.max_tokens == 3
    assert measured.prompt[:8] not in warm.prompt and measured.prompt[8:] not in warm.prompt


def test_stages_switch_rates_and_are_summarised_apart(calib_server, tmp_path):
    sc = scenario_from_dict(base(calib_server, tmp_path,
                                 {"prompt_tokens": {"dist": "fixed", "value": 8},
                                  "output_tokens": {"dist": "fixed", "value": 2}},
                                 {"mode": "server", "arrival": "constant", "duration_s": 1.0,
                                  "stages": [{"rate": 10, "duration_s": 0.5},
                                             {"rate": 40, "duration_s": 0.5}]}))
    res = run_scenario(sc)
    meta = json.loads((res.run_dir / "meta.json").read_text())
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    off = sorted((r["scheduled_at_ns"] - meta["t0_ns"]) // MS for r in recs)
    assert off[:5] == [0, 100, 200, 300, 400] and off[5:8] == [500, 525, 550]
    assert len(recs) == 5 + 20
    summary = json.loads((res.run_dir / "summary.json").read_text())
    s0, s1 = summary["stages"]
    assert (s0["requests"], s1["requests"], s0["rate"], s1["rate"]) == (5, 20, 10, 40)
    assert s0["failed"] == s1["failed"] == 0


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_concurrency_stages_change_the_number_of_users(calib_server, tmp_path):
    from loadgen.scenario.loader import scenario_from_dict as sfd
    tree = base(calib_server, tmp_path, {"prompt_tokens": {"dist": "fixed", "value": 8},
                                         "output_tokens": {"dist": "fixed", "value": 2}},
                {"mode": "concurrency", "duration_s": 2.6,
                 "stages": [{"concurrency": 1, "duration_s": 0.6},
                            {"concurrency": 4, "duration_s": 2.0}]})
    tree["api"]["extra_body"]["calib"] = {"ttft_ms": 20, "itl_ms": 10}   # ~30 ms per request
    res = run_scenario(sfd(tree))
    meta = json.loads((res.run_dir / "meta.json").read_text())
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    assert all(r["status"] == "ok" for r in recs)
    t0 = meta["t0_ns"]

    def max_in_flight(lo_ms, hi_ms):
        ev = sorted([(r["sent_at_ns"], 1) for r in recs] + [(r["end_at_ns"], -1) for r in recs])
        n = top = 0
        for t, d in ev:
            n += d
            if lo_ms * MS <= t - t0 < hi_ms * MS:
                top = max(top, n)
        return top
    # stage 1: one user, causally (no stage-2 user may send before 600 ms; user 0's own
    # stage-1 request keeps it busy across the edge). Stage 2 must be SEEN at 4 in flight, a
    # liveness property: 2 s of four users sending back to back, so a busy box's stall of a
    # few hundred ms still leaves them overlapping (it was 0.6 s)
    assert max_in_flight(0, 600) == 1 and max_in_flight(600, 2600) == 4
    s0, s1 = json.loads((res.run_dir / "summary.json").read_text())["stages"]
    assert (s0["concurrency"], s1["concurrency"]) == (1, 4) and s1["requests"] > 2 * s0["requests"]
