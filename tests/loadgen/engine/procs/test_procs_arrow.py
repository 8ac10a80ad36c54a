"""``--procs 2`` with output.records: arrow (issue 42) against the calibration server: each sender
process writes its records.K.arrow part, the parent merges them batch by batch into one
records.arrow (exactly one record per request, nothing left in procs/), and its summary is that of
its JSONL twin (the same records exported). -m slow: a real run of two processes."""
import json
import shutil

import pytest

from analysis.contract import validate_run_dir
from analysis.contract.columnar_io import export_jsonl
from analysis.metrics.summary import summary_of
from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from tests.loadgen.engine.procs.test_procs_run import ids_once, tree


def twin(d, tmp_path):
    """The run directory with records.jsonl (exported) instead of records.arrow."""
    j = tmp_path / "twin"
    shutil.copytree(d, j, ignore=shutil.ignore_patterns("records.arrow", "summary.json"))
    export_jsonl(d / "records.arrow", j / "records.jsonl")
    return j


def same_summary(d, j) -> None:
    a, b = summary_of(d), summary_of(j)
    for k in ("requests_total", "requests_completed", "measured_window_s", "ttft_ms",
              "tpot_ms", "e2e_ms"):
        assert json.dumps(a.get(k), default=str) == json.dumps(b.get(k), default=str), k
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@pytest.mark.slow
def test_two_processes_write_one_records_arrow(calib_server, tmp_path):
    load = {"mode": "concurrency", "concurrency": 4, "num_requests": 300, "warmup_requests": 2}
    res = run_scenario(scenario_from_dict(tree(calib_server, tmp_path, load,
                                               calib={"ttft_ms": 0, "itl_ms": 0},
                                               output={"dir": str(tmp_path), "run_name": "run",
                                                       "report": "none", "records": "arrow"})))
    d = res.run_dir
    assert (d / "records.arrow").is_file() and not (d / "records.jsonl").exists()
    assert not (d / "procs").exists()                          # parts merged, nothing left
    assert validate_run_dir(d) == []
    j = twin(d, tmp_path)
    recs = read_records(j / "records.jsonl")
    ids_once(recs, 302)
    assert {r["worker"] for r in recs} == {"0", "1"} and all(r["status"] == "ok" for r in recs)
    meta = json.loads((d / "meta.json").read_text())
    assert meta["records_written"] == 302 and not meta["crashed"]
    assert sum(p["records"] for p in meta["client_processes"]) == 302
    assert json.loads((d / "summary.json").read_text())["requests_completed"] == 300
    same_summary(d, j)


@pytest.mark.slow
def test_a_killed_sender_keeps_its_flushed_batches(calib_server, tmp_path):
    """SIGKILL to one sender: its part keeps the batches it flushed (one a second at least),
    merged; the rest of what it owed is 'cancelled' naming it; every id once in records.arrow."""
    import os
    import signal
    import time

    from analysis.contract.columnar import batches
    from tests.loadgen.engine.procs.test_procs_run import SLOW, finish, senders, start
    n = 60
    t = tree(calib_server, tmp_path, {"mode": "server", "rate": 15, "num_requests": n},
             calib=SLOW, processes=1,
             output={"dir": str(tmp_path), "run_name": "run", "report": "none",
                     "records": "arrow"})
    proc, d = start(tmp_path, t, "--procs", "2")
    parts = [d / "procs" / f"records.{k}.arrow" for k in (0, 1)]
    deadline = time.monotonic() + 90
    while not (all(p.is_file() and next(batches(p), None) is not None for p in parts)
               and len(senders(proc.pid)) == 2):      # a batch flushed by each sender
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    victim = senders(proc.pid)[0]
    os.kill(victim, signal.SIGKILL)
    out, err = finish(proc)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "was killed by SIGKILL mid-run" in err and "'cancelled' in records.arrow" in err
    assert not (d / "records.jsonl").exists() and validate_run_dir(d) == []
    j = twin(d, tmp_path)
    recs = read_records(j / "records.jsonl")
    ids_once(recs, n)
    meta = json.loads((d / "meta.json").read_text())
    (died,) = [p for p in meta["client_processes"] if p["status"] == "died"]
    mine = [r for r in recs if r["worker"] == str(died["index"])]
    kept = [r for r in mine if r["status"] == "ok"]
    lost = [r for r in mine if "killed by SIGKILL" in (r["error"] or "")]
    assert kept and lost and died["cancelled_unwritten"] == len(lost)
