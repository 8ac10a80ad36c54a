"""The simulated hosts themselves: each its own CLOCK_MONOTONIC, hostname and network, reachable
only through the bridge; nothing left behind, also after a failure or a killed owner."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.hosts import netns
from bench.hosts.netns import MASTER_IP, Hosts

ROOT = Path(__file__).resolve().parents[3]


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {ln.split(":")[1].strip() for ln in out.splitlines()}


def _mono(h: Hosts, ns: str) -> float:
    return float(h.call(ns, [sys.executable, "-c", "import time; print(time.monotonic())"]))


def test_each_host_has_its_own_clock_name_and_network(hosts_ok):
    offsets = [300, 3 * 86400]
    with Hosts(2, offsets, delay_ms=2) as h:
        names = {h.call(ns, ["hostname"]).strip() for ns in (h.master, h.worker(0), h.worker(1))}
        assert len(names) == 3 and socket_name() not in names
        here = time.monotonic()
        for i, off in enumerate(offsets):     # CLOCK_MONOTONIC moved by the host's offset
            assert _mono(h, h.worker(i)) - here > off - 60
        assert abs(_mono(h, h.master) - time.monotonic()) < 60   # the master's is ours
        assert h.addresses().count(MASTER_IP) == 1 and h.owns(h.worker_ip(1))
        assert not h.owns("10.0.0.1") and not h.owns("192.168.1.1")
        # worker 1 reaches the master over the bridge, not the world (no route out)
        probe = ("import socket,sys; s=socket.socket(); s.settimeout(5)\n"
                 "try: s.connect((sys.argv[1], 9)); print('connected')\n"
                 "except ConnectionRefusedError: print('refused')\n"
                 "except OSError as e: print('unreachable', e.errno)")
        assert h.call(h.worker(1), [sys.executable, "-c", probe, MASTER_IP]).strip() == "refused"
        assert h.call(h.worker(1), [sys.executable, "-c", probe, "8.8.8.8"]).startswith(
            "unreachable")
        d = h.describe()
        assert d["monotonic_offsets_s"] == offsets
        # netem: applied where the kernel has it, else the reason (this box: no sch_netem)
        assert d["netem"]["applied"] != bool(d["netem"]["why"])
    assert not [n for n in netns.ours() if n.startswith(h.name)]


def socket_name() -> str:
    import socket
    return socket.gethostname()


FAIL = r"""
import subprocess, sys
from bench.hosts.netns import Hosts
h = Hosts(2, [60, 120])
with h:
    p = h.run(h.worker(1), ["sleep", "300"], stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL)
    print(h.name, p.pid, flush=True)
    if sys.argv[1] == "raise":
        raise RuntimeError("forced failure")
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)       # no cleanup at all: the next Hosts sweeps
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_nothing_left_after_a_forced_failure(hosts_ok):
    before = _links()
    p = subprocess.run([sys.executable, "-c", FAIL, "raise"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode != 0 and "forced failure" in p.stderr
    name, pid = p.stdout.split()
    assert not [n for n in netns.ours() if n.startswith(name)]     # namespaces (and links)
    assert _links() == before                                      # nothing in ours
    assert not _alive(int(pid))                                    # its processes


def test_a_killed_owners_namespaces_are_swept(hosts_ok):
    p = subprocess.run([sys.executable, "-c", FAIL, "kill"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode == -9
    name, pid = p.stdout.split()
    left = [n for n in netns.ours() if n.startswith(name)]
    assert len(left) == 3                      # what a SIGKILL leaves: the next Hosts' sweep
    assert name + "-m" in netns.sweep_stale()
    assert not [n for n in netns.ours() if n.startswith(name)]
    assert not _alive(int(pid))
