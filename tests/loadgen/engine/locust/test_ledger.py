"""The worker ledger's deferred writing (loadgen/engine/locust/ledger.py): records taken at once,
written in batches when the hub idles, each encoded once (the forwarded line is the written
line), exactly one line per request however the run ends. gevent runs in a subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

SCRIPT = r"""
import json, sys
from pathlib import Path
import gevent
from loadgen.engine.locust import ledger as L
from loadgen.record import Record
d, how = Path(sys.argv[1]), sys.argv[2]
encoded = []
to_json = Record.to_json
def counting(self):                           # how often each record is encoded
    encoded.append(self.id)
    return to_json(self)
Record.to_json = counting
sent = []
led = L.WorkerLedger(d, 3, 0, True, lambda t, m: sent.append(m))
def rec(i):
    return Record(id=i, phase="measured", scheduled_at_ns=i, sent_at_ns=i + 1, status="ok",
                  chunks=[[100 + i + k, 1] for k in range(64)], output_tokens=64)
n = 2 * L.WRITE_BATCH + 5
expected = {}
for i in range(n):
    r = rec(i)
    assert led.write(r)
    expected[i] = to_json(r)                 # as written: worker "3", times unshifted (0)
dup = led.write(rec(0))                       # the id once only
path = d / "records.worker-3.jsonl"
before = path.read_text()
if how == "idle":                             # idle slots write every batch (however slow)
    for _ in range(5000):
        if path.read_text().count("\n") == n:
            break
        gevent.sleep(0.001)
mid = path.read_text().count("\n")
led.close()                                   # the run ends: what still waits, now
late = led.write(rec(n))
print(json.dumps({"n": n, "dup": dup, "late": late, "before": before, "mid": mid,
                  "count": led.writer.count, "expected": expected, "encoded": encoded,
                  "forwarded": [x for m in sent for x in m["records"]]}))
"""


def _run(tmp_path: Path, how: str) -> dict:
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), how], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check(tmp_path: Path, got: dict) -> list:
    lines = (tmp_path / "records.worker-3.jsonl").read_text(encoding="utf-8").splitlines()
    assert got["dup"] is False and got["late"] is False and got["before"] == ""
    assert len(lines) == got["count"] == got["n"]                 # exactly one line each
    ids = [json.loads(x)["id"] for x in lines]
    assert ids == list(range(got["n"]))                           # in the order taken
    for x in lines:                                              # the record as it was
        assert x == got["expected"][str(json.loads(x)["id"])]
    assert got["forwarded"] == lines                              # the same lines, forwarded
    assert sorted(got["encoded"]) == list(range(got["n"]))        # each encoded once
    return lines


def test_records_queued_when_the_run_ends_are_written_once_each_at_close(tmp_path):
    got = _run(tmp_path, "close")
    assert got["mid"] == 0                    # no yield: nothing written before close
    _check(tmp_path, got)


def test_idle_slots_write_the_batches_and_close_adds_nothing_twice(tmp_path):
    got = _run(tmp_path, "idle")
    assert got["mid"] == got["n"]             # all written in idle slots, in batches
    _check(tmp_path, got)
