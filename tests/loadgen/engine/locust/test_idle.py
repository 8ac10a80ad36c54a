"""The worker's idle-time bookkeeping and GC hold (loadgen/engine/locust/idle.py), and the
progress follower's partial decode (merge.py).
gevent runs in a subprocess: the pytest process is never gevent-patched."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from loadgen.engine.core.journal import Follower
from loadgen.client.gc_hold import GC_GEN0, hold_gc, release_gc
from loadgen.record import Record
from loadgen.console.progress import RunProgress

ROOT = Path(__file__).resolve().parents[4]

IDLE_SCRIPT = r"""
import json, logging
import gevent
from loadgen.engine.locust.idle import IdleQueue
logging.disable(logging.CRITICAL)
ran, out = [], {}
q = IdleQueue(max_queued=3)
for i in range(3):
    q.put(ran.append, i)
out["before_yield"] = list(ran)            # nothing runs until the hub is idle
gevent.sleep(0.01)
out["after_idle"] = list(ran)
busy = {"n": 0}
def spin():                                # keeps the hub's callbacks pending meanwhile
    while busy["n"] < 200:
        busy["n"] += 1
        gevent.sleep(0)
g = gevent.spawn(spin)
q.put(ran.append, 3)
gevent.sleep(0)
out["while_busy"] = list(ran)
g.join()
gevent.sleep(0.01)
out["after_busy"] = list(ran)
def boom():
    raise RuntimeError("disk full")
q.put(boom); q.put(ran.append, 4)
q.put(ran.append, 5)
q.put(ran.append, 6)                        # one over max_queued: the oldest runs at once
out["over_cap"] = list(ran)
q.close()                                   # everything still waiting, in order, now
out["closed"] = list(ran)
q.put(ran.append, 7)                        # after close: at once
out["after_close"] = list(ran)
out["ran"], out["ran_idle"] = q.ran, q.ran_idle
print(json.dumps(out))
"""

LEDGER_SCRIPT = r"""
import json, sys
from pathlib import Path
from loadgen.engine.locust.ledger import WorkerLedger
from loadgen.record import Record
d = Path(sys.argv[1])
led = WorkerLedger(d, 0, 0, False, lambda t, m: None)
recs = [Record(id=1, phase="measured", scheduled_at_ns=5, sent_at_ns=6, status="ok",
               chunks=[[10 + i, 1] for i in range(128)], output_text="héllo ✓"),
        Record(id=2, phase="measured", scheduled_at_ns=7, status="error", error_kind="protocol",
               error="bad \ud800 surrogate"),
        Record(id=3, phase="warmup", scheduled_at_ns=None, status="cancelled")]
first = [led.write(r) for r in recs] + [led.write(recs[0])]      # the id once only
path = d / "records.worker-0.jsonl"
before = path.read_text()                   # no yield since: the lines wait for an idle hub
led.close()
print(json.dumps({"first": first, "before": before, "expected": [r.to_json() for r in recs],
                  "count": led.writer.count, "late": led.write(Record(id=4, phase="measured",
                                                                        scheduled_at_ns=1))}))
"""


YOUNG_SCRIPT = r"""
import gc, json
import gevent
from loadgen.client.gc_hold import hold_gc, release_gc
from loadgen.engine.locust.idle import YoungGC
saved = hold_gc()                           # threshold 50 000: no automatic collection below
y = YoungGC(batch=500, check_s=0.001)
kept = [[i, 1] for i in range(5000)]        # young survivors, as a stream's [t, n] lists
young_before = gc.get_count()[0]
for _ in range(5000):                       # however slow the box: until it ran once
    if y.runs:
        break
    gevent.sleep(0.001)
young_after = gc.get_count()[0]
report = y.stop()
release_gc(saved)
print(json.dumps({"before": young_before, "after": young_after, "report": report}))
"""

def _gevent(script: str, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_idle_queue_runs_in_order_when_the_hub_is_idle_and_drains_on_close():
    got = _gevent(IDLE_SCRIPT)
    assert got["before_yield"] == []
    assert got["after_idle"] == [0, 1, 2]
    assert got["while_busy"] == [0, 1, 2]       # the spinning greenlet kept the hub busy
    assert got["after_busy"] == [0, 1, 2, 3]
    assert got["over_cap"] == [0, 1, 2, 3]      # boom ran (and failed) to make room
    assert got["closed"] == list(range(7))      # the failure logged, the rest in order
    assert got["after_close"] == list(range(8))
    assert (got["ran"], got["ran_idle"]) == (9, 4)


def test_ledger_writes_each_record_once_as_the_same_json_after_the_hub_idles(tmp_path):
    got = _gevent(LEDGER_SCRIPT, str(tmp_path))
    assert got["first"] == [True, True, True, False]
    assert got["before"] == ""
    lines = (tmp_path / "records.worker-0.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == got["count"] == 3
    for line, exp in zip(lines, got["expected"]):
        assert json.loads(line) == {**json.loads(exp), "worker": "0"}
    assert "héllo ✓" in lines[0]               # msgspec: UTF-8 as is
    assert "\\ud800" in lines[1]               # what msgspec refuses: Record.to_json's line
    assert got["late"] is False                 # closed: nothing more


def test_gc_hold_freezes_and_raises_the_young_threshold_then_gives_both_back():
    before = gc.get_threshold()
    saved = hold_gc()
    try:
        assert saved == before
        assert gc.get_threshold()[0] == max(before[0], GC_GEN0)
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > 0
    finally:
        release_gc(saved)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_young_generation_is_collected_in_small_batches_while_the_gc_is_held():
    got = _gevent(YOUNG_SCRIPT)
    assert got["before"] >= 5000 > got["after"]         # collected, not left to the threshold
    assert got["report"]["young_collections"] >= 1
    assert got["report"]["young_collect_ms"] >= 0


def test_follower_decodes_only_what_the_progress_needs(tmp_path):
    d = tmp_path / "locust"
    d.mkdir()
    ok = Record(id=0, phase="measured", scheduled_at_ns=1, status="ok", output_tokens=128,
                chunks=[[i, 1] for i in range(128)])
    bad = Record(id=1, phase="measured", scheduled_at_ns=1, status="error", error="\ud800")
    (d / "sent.worker-0.jsonl").write_text('{"id":0}\n{"id":1}\n{"id":2}\n')
    (d / "records.worker-0.jsonl").write_text(ok.to_json() + "\n" + bad.to_json() + "\n"
                                              + '{"id":2,"sta')   # a line still being written
    prog = RunProgress(None, enabled=False)
    f = Follower(d)
    f.poll(prog)
    assert (prog.sent, prog.completed, prog.failed, prog.tokens) == (3, 1, 1, 128)
    with open(d / "records.worker-0.jsonl", "a") as fh:
        fh.write('tus":"cancelled"}\n')
    f.poll(prog)
    assert (prog.cancelled, prog.in_flight) == (1, 0)
