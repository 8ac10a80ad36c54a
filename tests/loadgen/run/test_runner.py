"""The runner against the calibration server: one record per request, open loop, interrupts.

Timings are injected through the request body's ``calib`` object (api.extra_body); assertions
on them are tolerance checks generous enough for a loaded 2-core box.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.model import ScenarioError
from loadgen.scenario.loader import scenario_from_dict
from tests.support.procs import ExplodingProgress, interrupt_after_first_ok

ROOT = Path(__file__).resolve().parents[3]
MS = 1_000_000


def tree(calib_server, tmp_path, load, calib=None, api=None, workload=None, **top):
    return {"name": "t", "target": {"url": calib_server.url},
            "api": {"extra_body": {"calib": calib or {}}, **(api or {})},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 4}, **(workload or {})},
            "load": load, "output": {"dir": str(tmp_path), "run_name": "run", "report": "text"},
            **top}


def run(calib_server, tmp_path, load, **kw):
    res = run_scenario(scenario_from_dict(tree(calib_server, tmp_path, load, **kw)))
    recs = read_records(res.run_dir / "records.jsonl")
    return res, recs


def one_each(recs, n):
    ids = [r["id"] for r in recs]
    assert sorted(ids) == list(range(n)), "every planned request has exactly one record"


def test_server_run_writes_the_run_directory(calib_server, tmp_path, monkeypatch):
    monkeypatch.setenv("LOADGEN_TEST_KEY", "sk-very-secret-value")
    res, recs = run(calib_server, tmp_path, {"mode": "server", "rate": 40, "num_requests": 12,
                                             "warmup_requests": 3},
                    calib={"ttft_ms": 5, "itl_ms": 2},
                    api={"api_key_env": "LOADGEN_TEST_KEY", "headers": {"X-Api-Key": "hdr-secret"}})
    d = res.run_dir
    assert d == tmp_path / "run"
    for f in ("scenario.yaml", "records.jsonl", "sut.json", "meta.json", "summary.json",
              "report.md"):
        assert (d / f).is_file(), f
    one_each(recs, 15)
    assert [r["phase"] for r in sorted(recs, key=lambda r: r["id"])] == ["warmup"] * 3 + ["measured"] * 12
    assert all(r["status"] == "ok" for r in recs)
    meta = json.loads((d / "meta.json").read_text())
    summary = json.loads((d / "summary.json").read_text())
    sut = json.loads((d / "sut.json").read_text())
    assert meta["mode"] == "server" and meta["rate"] == 40 and meta["interrupted"] is False
    assert meta["scheduled_rate"] > 0 and meta["t0_ns"] > 0
    assert isinstance(meta["client_cpu"], float)
    assert summary["requests_completed"] == 12 and summary["requests_warmup"] == 3
    assert sut["model"] == "calib-model" and sut["models"]["data"][0]["id"] == "calib-model"
    assert sut["response_headers"]["server"] == "calibration-server/1"
    assert sut["completion_response_headers"]["content-type"].startswith("text/event-stream")
    assert sut["client_host"]["cpu_count"] >= 1 and "numpy" in sut["client_host"]["packages"]
    text = "".join((d / f).read_text() for f in os.listdir(d) if (d / f).is_file())
    assert "sk-very-secret-value" not in text and "hdr-secret" not in text
    assert yaml.safe_load((d / "scenario.yaml").read_text())["api"]["api_key_env"] \
        == "LOADGEN_TEST_KEY"
    # measured requests are on the schedule: scheduled_at - t0 equals the seeded offsets
    measured = sorted((r for r in recs if r["phase"] == "measured"), key=lambda r: r["id"])
    offs = [r["scheduled_at_ns"] - meta["t0_ns"] for r in measured]
    assert offs[0] == 0 and offs == sorted(offs)
    assert meta["schedule"]["scheduled_count"] == 12
    with pytest.raises(ScenarioError, match="already holds a run"):
        run(calib_server, tmp_path, {"mode": "server", "rate": 40, "num_requests": 1})


@pytest.mark.parametrize("calib, api, kind", [
    ({"fault": "http500"}, {}, "http"),
    ({"fault": "drop", "fault_at": 1, "itl_ms": 1}, {}, "connection"),
    ({"fault": "malformed", "fault_at": 1, "itl_ms": 1}, {}, "protocol"),
    ({"fault": "stall", "fault_at": 1, "itl_ms": 1, "stall_s": 5}, {"timeout_s": 0.3}, "timeout"),
])
def test_every_request_has_one_record_whatever_the_fault(calib_server, tmp_path, calib, api, kind):
    res, recs = run(calib_server, tmp_path, {"mode": "server", "rate": 100, "num_requests": 8,
                                             "warmup_requests": 1}, calib=calib, api=api)
    one_each(recs, 9)
    assert {r["status"] for r in recs} == {"error"}
    assert {r["error_kind"] for r in recs} == {kind}
    assert res.summary["requests_failed"] == 8 and res.summary["verdict"]["valid"] is False


def test_open_loop_keeps_sending_while_the_server_is_slow(calib_server, tmp_path):
    # 10 requests 30 ms apart, each taking >= 400 ms: all must go out before the first ends
    res, recs = run(calib_server, tmp_path, {"mode": "server", "rate": 1000 / 30,
                                             "arrival": "constant", "num_requests": 10},
                    calib={"ttft_ms": 400, "itl_ms": 1})
    one_each(recs, 10)
    assert all(r["status"] == "ok" for r in recs)
    assert max(r["sent_at_ns"] for r in recs) < min(r["end_at_ns"] for r in recs)
    t0 = res.meta["t0_ns"]
    for r in recs:
        assert r["scheduled_at_ns"] - t0 == round(r["id"] * 30 * MS)


def test_cap_delays_sends_but_never_the_schedule(calib_server, tmp_path):
    # cap 1, a 200 ms server and a 40 ms schedule: sends fall behind, scheduled_at does not
    res, recs = run(calib_server, tmp_path, {"mode": "server", "rate": 25, "arrival": "constant",
                                             "num_requests": 6, "max_concurrency": 1},
                    calib={"ttft_ms": 200, "itl_ms": 1})
    one_each(recs, 6)
    t0 = res.meta["t0_ns"]
    recs.sort(key=lambda r: r["id"])
    assert [r["scheduled_at_ns"] - t0 for r in recs] == [i * 40 * MS for i in range(6)]
    lags = [(r["sent_at_ns"] - r["scheduled_at_ns"]) / MS for r in recs]
    assert lags == sorted(lags) and lags[-1] > 600      # ≈ 5 × (200 − 40) ms
    for a, b in zip(recs, recs[1:]):                      # never two in flight
        assert b["sent_at_ns"] >= a["end_at_ns"]
    assert res.summary["schedule_lag_ms"]["max"] > 600
    assert res.summary["ttft_from_scheduled_ms"]["max"] > res.summary["ttft_ms"]["max"] + 500


def _max_in_flight(recs):
    ev = sorted([(r["sent_at_ns"], 1) for r in recs] + [(r["end_at_ns"], -1) for r in recs])
    cur = best = 0
    for _, d in ev:
        cur += d
        best = max(best, cur)
    return best


def test_offline_all_at_t0_with_cap(calib_server, tmp_path):
    res, recs = run(calib_server, tmp_path, {"mode": "offline", "num_requests": 9,
                                             "concurrency": 3}, calib={"ttft_ms": 30})
    one_each(recs, 9)
    assert {r["scheduled_at_ns"] for r in recs} == {res.meta["t0_ns"]}
    assert _max_in_flight(recs) == 3 and all(r["status"] == "ok" for r in recs)


def test_closed_loop_users(calib_server, tmp_path):
    res, recs = run(calib_server, tmp_path, {"mode": "concurrency", "concurrency": 2,
                                             "num_requests": 8}, calib={"ttft_ms": 20})
    one_each(recs, 8)
    assert _max_in_flight(recs) == 2
    ends = sorted(r["end_at_ns"] for r in recs)
    later = sorted(recs, key=lambda r: r["scheduled_at_ns"])[2:]
    for k, r in enumerate(later, 2):   # a user sends when it became free: after an earlier request
        # ended, and (2 users) only once all but one of the k requests before it had ended; how
        # soon after is the box's scheduling, not asserted
        assert any(0 <= r["scheduled_at_ns"] - e for e in ends)
        assert sum(e <= r["scheduled_at_ns"] for e in ends) >= k - 1


def test_closed_loop_duration_bound(calib_server, tmp_path):
    res, recs = run(calib_server, tmp_path, {"mode": "concurrency", "concurrency": 2,
                                             "duration_s": 0.6}, calib={"ttft_ms": 50})
    assert 4 <= len(recs) <= 30 and all(r["status"] == "ok" for r in recs)
    end = res.meta["t0_ns"] + 600 * MS
    assert all(r["scheduled_at_ns"] < end for r in recs)
    one_each(recs, len(recs))


def test_drain_timeout_cancels_stragglers(calib_server, tmp_path):
    res, recs = run(calib_server, tmp_path, {"mode": "offline", "num_requests": 3,
                                             "drain_timeout_s": 0.4},
                    calib={"fault": "stall", "fault_at": 1, "itl_ms": 1, "stall_s": 5})
    one_each(recs, 3)
    assert {r["status"] for r in recs} == {"cancelled"}
    assert all("drain_timeout_s" in r["error"] and r["sent_at_ns"] for r in recs)
    assert res.summary["requests_cancelled"] == 3


def test_managed_command_server(tmp_path):
    sc = {"name": "m", "target": {"server": {
              "kind": "command", "health_path": "/health", "startup_timeout_s": 30,
              "command": [sys.executable, "-m", "servers.calib",
                          "--port", "{port}"],
              "env": {"PYTHONPATH": str(ROOT)}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 3}},
          "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 4},
          "output": {"dir": str(tmp_path), "run_name": "m", "report": "none"}}
    res = run_scenario(scenario_from_dict(sc))
    recs = read_records(res.run_dir / "records.jsonl")
    one_each(recs, 4)
    sut = json.loads((res.run_dir / "sut.json").read_text())
    assert sut["managed_server"]["argv"][-1] == sut["target_url"].rsplit(":", 1)[1]
    assert (res.run_dir / "server.log").is_file()
    if len(os.sched_getaffinity(0)) >= 2:    # server pinned: the client ran on the other CPUs
        before = os.sched_getaffinity(0)
        first = sorted(before)[0]
        sc["target"]["server"]["cpus"] = [first]
        sc["output"]["run_name"] = "pinned"
        pinned = run_scenario(scenario_from_dict(sc))
        assert pinned.meta["client_cpus"] == sorted(before - {first})
        assert os.sched_getaffinity(0) == before          # restored after the run
        assert len(read_records(pinned.run_dir / "records.jsonl")) == 4


def test_sigint_keeps_finished_and_cancels_the_rest(calib_server, tmp_path):
    sc = tree(calib_server, tmp_path, {"mode": "server", "rate": 10, "arrival": "constant",
                                       "num_requests": 60, "warmup_requests": 1},
              calib={"ttft_ms": 200, "itl_ms": 50}, workload={"output_tokens":
                                                              {"dist": "fixed", "value": 20}})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    proc = subprocess.Popen([sys.executable, "-m", "loadgen.cli", "run", str(path), "--json"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rec_path = tmp_path / "run" / "records.jsonl"
    out, err = interrupt_after_first_ok(proc, tmp_path / "run", signal.SIGINT)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    recs = read_records(rec_path)
    one_each(recs, 61)
    by = {}
    for r in recs:
        by.setdefault(r["status"], []).append(r)
    assert by.get("ok") and by.get("cancelled")
    cancelled = by["cancelled"]
    assert any(r["sent_at_ns"] is not None for r in cancelled)        # were in flight
    assert any(r["sent_at_ns"] is None for r in cancelled)            # scheduled, never sent
    assert all(r["error_kind"] == "cancelled" for r in cancelled)
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["interrupted"] is True and meta["interrupt_signal"] == "SIGINT"
    summary = json.loads(out.strip().splitlines()[-1])["summary"]
    assert summary["verdict"]["valid"] is False
    assert summary["requests_cancelled"] == len(cancelled)


def test_crash_mid_run_keeps_one_record_each(calib_server, tmp_path):
    sc = scenario_from_dict(tree(calib_server, tmp_path, {"mode": "server", "rate": 50,
                                                          "num_requests": 30},
                                 calib={"ttft_ms": 100, "itl_ms": 5}))
    with pytest.raises(KeyboardInterrupt):
        run_scenario(sc, ExplodingProgress(at=3))
    d = tmp_path / "run"
    recs = read_records(d / "records.jsonl")
    one_each(recs, 30)
    status = [r["status"] for r in recs]
    assert status.count("ok") >= 3 and "cancelled" in status
    meta = json.loads((d / "meta.json").read_text())
    assert meta["interrupted"] is True and meta["crashed"]


def test_power_sampling_is_wired(calib_server, tmp_path):
    res, recs = run(calib_server, tmp_path, {"mode": "concurrency", "concurrency": 2,
                                             "num_requests": 6}, calib={"ttft_ms": 50},
                    power={"sources": ["estimate"], "estimate_watts": 100, "sample_hz": 20})
    one_each(recs, 6)
    rows = read_records(res.run_dir / "power.jsonl")
    marks = [r["value"] for r in rows if r["kind"] == "mark"]
    assert "measure_start" in marks and "measure_end" in marks
    assert any(r["kind"] == "power_w" and r["value"] == 100 for r in rows)
    assert res.meta["power_sources"][0]["name"] == "estimate"
    assert res.summary["energy"]["status"] == "estimated"   # a hand-given figure, labelled so


def test_drain_timeout_counts_from_the_last_send(calib_server, tmp_path):
    # cap 1 and 250 ms requests: the last one is sent ~750 ms after t0, well past the 0.5 s drain
    res, recs = run(calib_server, tmp_path, {"mode": "offline", "num_requests": 4,
                                             "concurrency": 1, "drain_timeout_s": 0.5},
                    calib={"ttft_ms": 250})
    one_each(recs, 4)
    assert [r["status"] for r in recs] == ["ok"] * 4


def test_schedule_seed(calib_server, tmp_path):
    from loadgen.run.runner import Run
    load = {"mode": "server", "rate": 5, "num_requests": 20}

    def offsets(**extra):
        return Run(scenario_from_dict(tree(calib_server, tmp_path, {**load, **extra}))) \
            .schedule.offsets_ns.tolist()
    assert offsets() == offsets(seed=1)            # default: workload.seed + 1
    assert offsets(seed=5) == offsets(seed=5) != offsets(seed=6)
