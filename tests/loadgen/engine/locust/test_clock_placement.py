"""The "same host" shortcut is checked, not assumed (issue 32): one kernel (boot id) is not one
CLOCK_MONOTONIC when a time namespace moves it; a worker's clock that cannot be placed says so."""
from __future__ import annotations

from loadgen.engine.core.clock import (clock_estimate, clock_info, clock_pair,
                                       estimate_from)

SEC = 1_000_000_000


def _pings(offset_ns: int, rtt_ns: int = 200_000, n: int = 4):
    """Ping-pongs against a master whose clock reads ``offset_ns`` more than ours."""
    return [(t, t + rtt_ns // 2 + offset_ns, t + rtt_ns) for t in range(0, n * SEC, SEC)]


def test_same_kernel_same_time_namespace_and_agreeing_pings_is_same_host():
    e = estimate_from(clock_pair(), _pings(0))
    assert (e["method"], e["shift_ns"], e["uncertainty_ns"], e["placed"]) == (
        "same_host", 0, 0, True)
    assert e["checked"] == ["boot_id", "time_namespace", "ping_pong"]


def test_a_time_namespace_keeps_the_boot_id_but_is_not_the_same_clock():
    master = dict(clock_pair(), time_ns="time:[1]")           # same boot id, other namespace
    e = estimate_from(master, _pings(-600 * SEC))
    assert (e["method"], e["shift_ns"], e["offset_ns"]) == ("ping_pong", -600 * SEC, -600 * SEC)
    assert e["uncertainty_ns"] == 100_000 and e["placed"] and e["checked"] == []


def test_pings_that_contradict_one_clock_win_over_the_namespace_ids():
    e = estimate_from(clock_pair(), _pings(3 * 86400 * SEC))   # ids agree, the clocks do not
    assert (e["method"], e["shift_ns"]) == ("ping_pong", 3 * 86400 * SEC)


def test_an_unanswered_worker_on_another_clock_is_said_unplaced():
    master = dict(clock_pair(), time_ns="time:[1]")
    e = estimate_from(master, [])
    assert e["method"] == "wall_clock" and e["uncertainty_ns"] is None
    assert e["placed"] is False and "wall clocks" in e["why"]
    none = clock_estimate(False)                # nothing to place it by: never a silent 0
    assert (none["method"], none["placed"], none["uncertainty_ns"]) == ("unplaced", False, None)
    info = clock_info({"0": estimate_from(clock_pair(), _pings(0)), "1": e, "2": none})
    assert info["unplaced"] == ["1", "2"] and info["max_uncertainty_ns"] is None


ALIVE = r"""
from gevent import monkey; monkey.patch_all()
import json, os, socket
from types import SimpleNamespace
from loadgen.engine.locust.coordinator import Coordinator
from loadgen.engine.core.clock import boot_id, ns_id
c = Coordinator.__new__(Coordinator)          # alive() reads only these
c.local = False
running = SimpleNamespace(state="running")
c.env = SimpleNamespace(runner=SimpleNamespace(worker_indexes={"a": 0}, clients={"a": running}))
here = {"pid": 2 ** 22 + 7, "host": socket.gethostname(), "boot_id": boot_id(),
        "pid_ns": ns_id("pid")}                # a pid no process here has
out = {}
for name, ready in (("this_host_exited", here),
                    ("other_machine_same_name", dict(here, boot_id="another-boot")),
                    ("other_pid_namespace", dict(here, pid_ns="pid:[1]"))):
    c.got = {"loadgen_ready": {0: ready}}
    out[name] = c.alive(0)
print(json.dumps(out))
"""


def test_a_workers_pid_is_looked_up_only_where_it_means_a_process():
    """A worker with the master's hostname on another machine (or in another pid namespace)
    is judged by Locust's heartbeats, not by a pid lookup here (that pid is another's)."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[4]
    p = subprocess.run([sys.executable, "-c", ALIVE], capture_output=True, text=True, cwd=root,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"this_host_exited": False, "other_machine_same_name": True,
                                    "other_pid_namespace": True}
