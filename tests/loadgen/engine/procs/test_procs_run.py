"""``client.processes: 2`` / ``loadgen run --procs 2`` against the calibration server (127.0.0.1):
one records.jsonl with exactly one record per request, the contract valid, a killed sender
process and an interrupt still leave every record. No timing asserts (a loaded 2-core box)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from analysis.contract import validate_run_dir
from loadgen.cli import main as cli_main
from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict

ROOT = Path(__file__).resolve().parents[4]


def tree(calib_server, tmp_path, load, calib=None, processes=2, **top):
    return {"name": "procs", "target": {"url": calib_server.url},
            "api": {"extra_body": {"calib": calib or {"ttft_ms": 5, "itl_ms": 2}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 4}},
            "load": load, "client": {"processes": processes},
            "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}, **top}


def ids_once(recs, n):
    assert sorted(r["id"] for r in recs) == list(range(n)), "one record per request"


@pytest.mark.parametrize("load", [
    {"mode": "server", "rate": 60, "num_requests": 16, "warmup_requests": 3},
    {"mode": "concurrency", "concurrency": 3, "num_requests": 17, "warmup_requests": 2},
])
def test_two_processes_one_run(calib_server, tmp_path, load):
    res = run_scenario(scenario_from_dict(tree(calib_server, tmp_path, load)))
    d = res.run_dir
    recs = read_records(d / "records.jsonl")
    w = load["warmup_requests"]
    ids_once(recs, w + load["num_requests"])
    assert all(r["status"] == "ok" for r in recs)
    assert {r["worker"] for r in recs} == {"0", "1"}           # both processes sent
    assert validate_run_dir(d) == []
    meta = json.loads((d / "meta.json").read_text())
    procs = meta["client_processes"]
    assert [p["index"] for p in procs] == [0, 1] and all(p["status"] == "done" for p in procs)
    assert sum(p["records"] for p in procs) == len(recs)
    for p in procs:      # the one clock-offset record (engine/core/clock.py, as Locust's workers)
        assert (p["clock"]["method"], p["clock"]["shift_ns"], p["clock"]["uncertainty_ns"]) == (
            "same_host", 0, 0)
    assert meta["client_cpu"] == max(p["cpu_util"] for p in procs)   # the busiest process
    assert meta["client_load"]["processes"] == 2 and meta["records_written"] == len(recs)
    assert meta["client_transport"]["processes"] == 2 and not meta["crashed"]
    assert not (d / "procs").exists()                          # parts merged, nothing left
    assert "busy" in meta["host_load"]     # the measured window's host load, as one process's
    measured = [r for r in recs if r["phase"] == "measured"]
    if load["mode"] == "server":       # one t0 and the one schedule, whichever process sent
        offs = sorted(r["scheduled_at_ns"] - meta["t0_ns"] for r in measured)
        assert offs[0] == 0 and len(set(offs)) == len(offs)
        assert meta["unsent_requests"] is None
    else:
        assert meta["unsent_requests"] == 0
    summary = json.loads((d / "summary.json").read_text())
    assert summary["requests_completed"] == load["num_requests"]


def test_flags_and_fields_refused_in_one_line(tmp_path, capsys, calib_server):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(tree(calib_server, tmp_path,
                                     {"mode": "concurrency", "concurrency": 2, "num_requests": 2},
                                     processes=1)))
    for argv, text in ((["--procs", "0"], "--procs 0:"),
                       (["--procs", "two"], "--procs two:"),
                       (["--procs", "3"], "client.processes: 3 processes share load.concurrency"),
                       (["--procs", "2", "--engine", "locust"], "--procs: native engine only")):
        assert cli_main(["run", str(p), "--json", *argv]) == 2
        err = capsys.readouterr().err
        assert text in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("client, text", [
    ({"processes": 2}, "workload.source sessions runs in one process"),
    ({"processes": True}, "client.processes: must be a whole number"),
    ({"procs": 2}, "client.procs: unknown key"),
])
def test_scenario_client_block_is_strict(client, text, calib_server, tmp_path):
    from loadgen.scenario.model import ScenarioError
    t = tree(calib_server, tmp_path, {"mode": "concurrency", "concurrency": 2, "num_requests": 2})
    t["client"] = client
    if "sessions" in text:
        t["api"]["endpoint"] = "chat"
        t["workload"] = {"source": "sessions", "path": str(tmp_path / "c.json")}
    with pytest.raises(ScenarioError, match=text):
        scenario_from_dict(t)


def start(tmp_path, sc: dict, *extra) -> tuple[subprocess.Popen, Path]:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    proc = subprocess.Popen([sys.executable, "-m", "loadgen.cli", "run", str(p), "--json",
                             *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    return proc, tmp_path / "run"


def senders(pid: int) -> list[int]:
    """The sender processes (loadgen.engine.procs.child) among ``pid``'s children."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    out = []
    for k in kids:
        try:
            if b"loadgen.engine.procs.child" in Path(f"/proc/{k}/cmdline").read_bytes():
                out.append(int(k))
        except OSError:
            pass
    return out


def wait_for_records(proc, run_dir: Path, n: int = 1) -> None:
    """Until the sender processes wrote ``n`` measured records between them."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        parts = list((run_dir / "procs").glob("records.*.jsonl"))
        got = sum(1 for f in parts for r in read_records(f) if r["phase"] == "measured")
        if got >= n and len(senders(proc.pid)) == 2:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("no records from the sender processes")


def finish(proc) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


SLOW = {"ttft_ms": 100, "itl_ms": 20}        # ~200 ms a request: a run of a few seconds


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_killed_sender_process_leaves_every_record(calib_server, tmp_path):
    n = 60
    proc, d = start(tmp_path, tree(calib_server, tmp_path,
                                   {"mode": "server", "rate": 15, "num_requests": n},
                                   calib=SLOW, processes=1), "--procs", "2")
    wait_for_records(proc, d, 2)
    victim = senders(proc.pid)[0]
    os.kill(victim, signal.SIGKILL)
    out, err = finish(proc)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "was killed by SIGKILL mid-run" in err and f"pid {victim}" in err
    recs = read_records(d / "records.jsonl")
    ids_once(recs, n)
    lost = [r for r in recs if "killed by SIGKILL" in (r["error"] or "")]
    assert lost and all(r["status"] == "cancelled" for r in lost)
    assert {r["status"] for r in recs} <= {"ok", "cancelled"}
    meta = json.loads((d / "meta.json").read_text())
    assert "SIGKILL" in meta["crashed"]
    died = [p for p in meta["client_processes"] if p["status"] == "died"]
    assert len(died) == 1 and died[0]["pid"] == victim and died[0]["exit_code"] == -9
    # the parent writes the dead process's owed records (worker = its index); the survivor may
    # have cancelled some of its own, naming the death as the reason, before it was told to stop
    mine = [r for r in lost if r["worker"] == str(died[0]["index"])]
    assert mine and died[0]["cancelled_unwritten"] == len(mine)
    assert validate_run_dir(d) == []


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("how", ["parent", "group"])
def test_an_interrupt_exits_130_with_every_record(calib_server, tmp_path, how):
    n = 60
    proc, d = start(tmp_path, tree(calib_server, tmp_path,
                                   {"mode": "server", "rate": 15, "num_requests": n},
                                   calib=SLOW, processes=2))
    wait_for_records(proc, d, 1)
    if how == "parent":          # SIGTERM to loadgen only: it forwards to its processes
        proc.send_signal(signal.SIGTERM)
    else:                        # Ctrl-C in a terminal: SIGINT to the whole process group
        os.killpg(proc.pid, signal.SIGINT)
    out, err = finish(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    recs = read_records(d / "records.jsonl")
    ids_once(recs, n)
    assert any(r["status"] == "ok" for r in recs) and any(r["status"] == "cancelled" for r in recs)
    meta = json.loads((d / "meta.json").read_text())
    assert meta["interrupted"] is True and not meta["crashed"]
    assert all(p["status"] == "stopped" for p in meta["client_processes"])
    assert validate_run_dir(d) == []


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_closed_loop_interrupt_counts_the_unsent(calib_server, tmp_path):
    n = 10 ** 9
    proc, d = start(tmp_path, tree(calib_server, tmp_path,
                                   {"mode": "concurrency", "concurrency": 4, "num_requests": n},
                                   calib=SLOW, processes=2))
    wait_for_records(proc, d, 2)
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc)
    assert proc.returncode == 130, err
    recs = read_records(d / "records.jsonl")
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids)) and len(ids) < 1000        # started ones, once each
    meta = json.loads((d / "meta.json").read_text())
    assert meta["unsent_requests"] == n - len(recs)
    assert validate_run_dir(d) == []


@pytest.mark.parametrize("load", [
    {"mode": "trace", "num_requests": 6, "warmup_requests": 2, "time_scale": 0.2},
    {"mode": "offline", "num_requests": 7, "warmup_requests": 3},
])
def test_each_process_sends_its_slice_of_the_one_process_plan(calib_server, tmp_path, load):
    """Every child builds its own slice (engine.core.plan.Plan): together, request for request,
    the one-process run's ids, phases, sizes and schedule offsets."""
    rows = [{"timestamp": 1000 + 100 * i, "input_length": 10 + 3 * i, "output_length": 2 + i,
             "hash_ids": [i, i + 1]} for i in range(6)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    workload = ({"tokenizer": "bytes", "source": "trace", "block_tokens": 8,
                 "path": str(tmp_path / "trace.jsonl")} if load["mode"] == "trace" else
                {"tokenizer": "bytes", "prompt_tokens": {"dist": "uniform", "min": 4, "max": 60},
                 "output_tokens": {"dist": "uniform", "min": 2, "max": 9}})
    seen = []
    for n in (1, 2):
        t = tree(calib_server, tmp_path / str(n), load, processes=n)
        t["workload"] = workload
        d = run_scenario(scenario_from_dict(t)).run_dir
        meta = json.loads((d / "meta.json").read_text())
        seen.append(sorted(
            (r["id"], r["phase"], r["status"], r["requested_output_tokens"],
             r["workload_prompt_tokens"],
             r["scheduled_at_ns"] - meta["t0_ns"] if r["phase"] == "measured" else None)
            for r in read_records(d / "records.jsonl")))
    assert seen[0] == seen[1] and len(seen[0]) == load["num_requests"] + load["warmup_requests"]
