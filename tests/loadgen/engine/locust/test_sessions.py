"""Multi-turn sessions on the Locust engine (loadgen/engine/locust/sessions.py): real
``loadgen run --engine locust`` processes against the calibration server on 127.0.0.1, whose
log shows each turn's messages and headers as they arrived."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

if importlib.util.find_spec("locust") is None:   # find_spec: importing locust patches pytest
    pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')",
                allow_module_level=True)

from analysis.contract import validate_run_dir
from loadgen.engine.core.plan import Plan, owner, users_for
from loadgen.record import read_records
from loadgen.scenario.loader import load_scenario
from servers.calib import CalibrationServer
from tests.support.procs import interrupt_after

ROOT = Path(__file__).resolve().parents[4]
CONV = [{"conversations": [{"from": "human", "value": "first question"},
                           {"from": "gpt", "value": "x y z"},
                           {"from": "human", "value": "second question"},
                           {"from": "gpt", "value": "x"},
                           {"from": "human", "value": "third"}]}]


@pytest.fixture(scope="module")
def server():
    with CalibrationServer(ttft_ms=5, itl_ms=1) as s:
        yield s


def _scenario(tmp_path: Path, url: str, load: dict, name: str = "ls", think_s: float = 0.05,
              **api) -> Path:
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(CONV))
    tree = {"name": name, "target": {"url": url},
            "api": {"model": "calib-model", "endpoint": "chat",
                    "session_header": "X-Session-ID", **api},
            "workload": {"source": "sessions", "path": str(conv), "tokenizer": "bytes",
                         "think_time_s": {"dist": "fixed", "value": think_s}},
            "load": load, "output": {"dir": str(tmp_path / "runs"), "run_name": name,
                                     "report": "none"}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(tree))
    return p


def _argv(path: Path, workers) -> list[str]:
    out = [sys.executable, "-m", "loadgen", "run", str(path), "--json"]
    if workers != "native":
        out += ["--engine", "locust"] + (["--workers", str(workers)] if workers else [])
    return out


def _cli(path: Path, workers=None) -> Path:
    out = subprocess.run(_argv(path, workers), cwd=ROOT, capture_output=True, text=True,
                         timeout=180, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-3000:]
    return Path(json.loads(out.stdout.strip().splitlines()[-1])["run_dir"])


def _by_session(recs: list[dict]) -> dict[str, list[dict]]:
    out: dict = {}
    for r in sorted(recs, key=lambda r: r["id"]):
        if r["phase"] == "measured":
            out.setdefault(r["session_id"], []).append(r)
    return out


def _check_conversations(recs: list[dict], log: list[dict]) -> None:
    """Every turn in order; each later turn sent after the earlier answer, carrying it."""
    sent = {}                                   # (session, user turns so far) -> messages
    for e in log:
        if e.get("messages"):
            sid = e["x_headers"].get("X-Session-ID")
            users = sum(m["role"] == "user" for m in e["messages"])
            sent[(sid, users)] = e["messages"]
    for sid, turns in _by_session(recs).items():
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1)), sid
        for prev, r in zip(turns, turns[1:]):
            assert r["scheduled_at_ns"] >= prev["end_at_ns"] and r["sent_at_ns"] > prev["end_at_ns"]
        for r in turns:
            assert r["status"] == "ok" and r["output_text"], r
            msgs = sent[(sid, r["turn"])]          # what the server got for this turn
            assert [m["role"] for m in msgs] == ["user", "assistant"] * (r["turn"] - 1) + ["user"]
            answers = [m["content"] for m in msgs if m["role"] == "assistant"]
            assert answers == [p["output_text"][:120] for p in turns[:r["turn"] - 1]]
            user = [CONV[0]["conversations"][2 * i]["value"] for i in range(r["turn"])]
            assert [m["content"] for m in msgs if m["role"] == "user"] == user


def test_plan_slices_sessions_and_turn_ids_over_workers(tmp_path):
    p = _scenario(tmp_path, "http://127.0.0.1:9", {"mode": "server", "rate": 5,
                                                   "num_requests": 11, "warmup_requests": 2})
    sc = load_scenario(p)
    whole = Plan(sc)
    assert whole.sessions and whole.expected_ids() == [0, 1]      # turns: journaled only
    ids, sessions = [], []
    for w in range(3):
        plan = Plan(sc, w, 3)
        mine = list(plan.slot_ids())
        assert all(owner(i, 2, 3) == w for i in mine)
        ids += mine
        sessions += [(s.id, off) for s, off in plan.session_slice()]
    assert sorted(ids) == list(range(2, 13))                       # the turn budget, shared
    offs = whole.schedule.offsets_ns
    assert sorted(sessions, key=lambda x: int(x[0].split("-")[1])) == [
        (f"s0-{j}", int(offs[j])) for j in range(11)]              # every start once
    assert users_for(sc, whole.schedule, 3) % 3 == 0


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_concurrency_sessions_on_two_workers(tmp_path, server):
    server.clear()
    p = _scenario(tmp_path, server.url, {"mode": "concurrency", "concurrency": 4,
                                         "num_requests": 12, "warmup_requests": 2})
    run = _cli(p, workers=2)
    recs = read_records(run / "records.jsonl")
    assert sorted(r["id"] for r in recs) == list(range(14))        # every turn once
    assert [r["session_id"] for r in recs if r["phase"] == "warmup"] == [None, None]
    by = _by_session(recs)
    assert len(by) == 4 and all(len(t) == 3 for t in by.values())  # 4 users, 3 turns each
    for sid, turns in by.items():                 # session j belongs to worker j mod 2
        assert {r["worker"] for r in turns} == {str(int(sid.split("-")[1]) % 2)}
    _check_conversations(recs, server.log(clear=True))
    meta = json.loads((run / "meta.json").read_text())
    assert meta["engine"] == "locust" and meta["unsent_requests"] == 0
    assert meta["locust"]["worker_status"] == {"0": "done", "1": "done"}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["sessions"]["sessions"] == 4 and summary["sessions"]["turns"] == 12
    assert validate_run_dir(run) == []


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_server_mode_sessions_start_on_the_schedule(tmp_path, server):
    server.clear()
    p = _scenario(tmp_path, server.url, {"mode": "server", "rate": 20, "arrival": "constant",
                                         "num_requests": 7})
    run = _cli(p, workers=1)
    recs = read_records(run / "records.jsonl")
    assert sorted(r["id"] for r in recs) == list(range(7))
    t0 = json.loads((run / "meta.json").read_text())["t0_ns"]
    firsts = sorted(r["scheduled_at_ns"] - t0 for r in recs if r["turn"] == 1)
    assert len(firsts) >= 3 and firsts == [50_000_000 * i for i in range(len(firsts))]
    for turns in _by_session(recs).values():      # think time: due = answer's end + 50 ms
        for prev, r in zip(turns, turns[1:]):
            assert r["scheduled_at_ns"] - prev["end_at_ns"] == 50_000_000
    _check_conversations(recs, server.log(clear=True))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_same_turn_records_as_the_native_engine(tmp_path, server):
    load = {"mode": "concurrency", "concurrency": 1, "num_requests": 5, "warmup_requests": 1}
    native = read_records(_cli(_scenario(tmp_path, server.url, load, "nat"), "native")
                          / "records.jsonl")
    ours = read_records(_cli(_scenario(tmp_path, server.url, load, "loc")) / "records.jsonl")
    keys = ("id", "phase", "status", "session_id", "turn", "requested_output_tokens",
            "workload_prompt_tokens", "prompt_tokens", "output_tokens", "output_text")
    assert [{k: r[k] for k in keys} for r in ours] == [{k: r[k] for k in keys} for r in native]
    assert all(set(a) == set(b) for a, b in zip(ours, native))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_drain_timeout_cancels_the_turns_left(tmp_path, server):
    """A think time longer than load.drain_timeout_s: the native driver's rule cancels the
    session's turns left, drain_timeout_s after the last send (not after the think time)."""
    p = _scenario(tmp_path, server.url, {"mode": "concurrency", "concurrency": 1,
                                         "num_requests": 3, "drain_timeout_s": 0.5},
                  think_s=60.0)
    run = _cli(p)
    recs = sorted(read_records(run / "records.jsonl"), key=lambda r: r["id"])
    assert [(r["turn"], r["status"]) for r in recs] == [(1, "ok"), (2, "cancelled"),
                                                        (3, "cancelled")]
    assert all("load.drain_timeout_s" in r["error"] for r in recs[1:])
    assert recs[1]["scheduled_at_ns"] - recs[0]["end_at_ns"] == 60_000_000_000   # when due
    assert recs[2]["scheduled_at_ns"] is None and recs[1]["sent_at_ns"] is None


@pytest.mark.parametrize("load", [
    {"mode": "concurrency", "concurrency": 2, "num_requests": 40},
    {"mode": "server", "rate": 4, "arrival": "constant", "num_requests": 40},
])
@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_interrupted_sessions_record_every_unsent_turn(tmp_path, load):
    """SIGINT once the first turn is answered (think time 0.3 s, each turn >= 150 ms): every
    started session's unsent turns get a cancelled record; server mode: so do the sessions
    scheduled but not started (every turn of load.num_requests has a record); concurrency
    mode: the rest of the budget is the count unsent_requests, as the native engine's."""
    with CalibrationServer(ttft_ms=150, itl_ms=20) as slow:
        p = _scenario(tmp_path, slow.url, load, think_s=0.3)
        run_dir = tmp_path / "runs" / "ls"
        proc = subprocess.Popen(_argv(p, 2), cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        out, err = interrupt_after(proc, lambda: any(
            r["status"] == "ok" for f in (run_dir / "locust").glob("records.worker-*.jsonl")
            for r in read_records(f)), 90)
    assert proc.returncode == 130, err[-2000:]
    recs = read_records(run_dir / "records.jsonl")
    assert len({r["id"] for r in recs}) == len(recs)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["interrupted"]
    unsent = meta["unsent_requests"] or 0
    assert len(recs) + unsent == 40
    if load["mode"] == "server":
        assert unsent == 0 and sorted(r["id"] for r in recs) == list(range(40))
    for sid, turns in _by_session(recs).items():          # no turn skipped, none unrecorded
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1)), sid
        if load["mode"] == "concurrency":       # a started session: all its turns (budget 20
            assert len(turns) == 3, sid         # per worker, far from reached)
    never = [r for r in recs if r["status"] == "cancelled" and r["sent_at_ns"] is None]
    assert never and all(r["session_id"] and r["turn"] for r in never)
    assert all("interrupted" in r["error"] for r in never)
