"""K simulated hosts and the master's host, made of Linux namespaces; all of it removed at exit.

    <name>-m    network namespace of the master and the target server: bridge br0 10.77.0.1/24
    <name>-wI   network namespace of worker I: eth0 10.77.0.(10+I)/24, its veth peer hI on br0
                in <name>-m; the worker's processes also get a time namespace (CLOCK_MONOTONIC
                + offsets_s[I]) and a UTS namespace (hostname <tag>-wI) from ``unshare``
Every link lives inside a namespace made here (none in the caller's), so deleting the
namespaces removes every veth, the bridge and every qdisc; the processes started in them are
killed first (``ip netns pids``: only ours live there). <name> is ``loadgen-<pid>-<hex>``:
tests running at once never share a name, and a namespace whose owner pid is gone (a SIGKILLed
test) is swept by the next Hosts. Nothing but 10.77.0.0/24 inside these namespaces, and no
route out of them, so nothing else is ever a target (``owns(addr)`` checks an address).
netem: where the kernel has sch_netem, ``delay_ms``/``jitter_ms`` on each worker's link (both
ends); where it has not, ``netem`` says why and the links run without delay.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from typing import Optional, Sequence

from servers.port_server import alive

PREFIX = "loadgen-"
NET = "10.77.0"
MASTER_IP = f"{NET}.1"
_checked: dict = {}


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def unavailable() -> Optional[str]:
    """Why simulated hosts cannot be made here (one line), or None: root, ip, unshare with
    time namespaces, a network namespace with a veth pair. Checked once per process."""
    if "why" in _checked:
        return _checked["why"]
    why = None
    if not sys.platform.startswith("linux"):
        why = "simulated hosts need Linux namespaces"
    elif os.geteuid() != 0:
        why = "simulated hosts need root (ip netns, unshare --time): not root here"
    elif not (shutil.which("ip") and shutil.which("unshare")):
        why = "simulated hosts need the ip and unshare commands (iproute2, util-linux)"
    elif not os.path.exists("/proc/self/ns/time"):
        why = "this kernel has no time namespaces (Linux >= 5.6)"
    else:
        p = subprocess.run(["unshare", "--net", "--uts", "--time", "--monotonic", "1", "--",
                            "ip", "link", "add", "a0", "type", "veth", "peer", "name", "b0"],
                           capture_output=True, text=True)
        if p.returncode:
            why = f"cannot make namespaces with a veth pair here: {p.stderr.strip()[:200]}"
    _checked["why"] = why
    return why


def netem_missing() -> Optional[str]:
    """Why ``tc qdisc ... netem`` cannot be used here (measured once), or None."""
    if "netem" in _checked:
        return _checked["netem"]
    if not shutil.which("tc"):
        why = "no tc command (iproute2)"
    else:
        p = subprocess.run(["unshare", "--net", "--", "sh", "-c",
                            "ip link add a0 type veth peer name b0 && "
                            "tc qdisc add dev a0 root netem delay 1ms"],
                           capture_output=True, text=True)
        why = (None if p.returncode == 0 else
               f"the kernel has no sch_netem (tc: {p.stderr.strip()[:120]}): links run "
               "without added delay")
    _checked["netem"] = why
    return why


def ours() -> list[str]:
    """The namespaces named by this module that exist now (any owner)."""
    out = _ip("netns", "list", check=False).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith(PREFIX)]


def _kill_in(ns: str) -> None:
    """Every process in namespace ``ns`` (only processes started there by Hosts): TERM, KILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + 5
        while pids and time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.05)


def _delete(ns: str) -> None:
    _kill_in(ns)
    _ip("netns", "del", ns, check=False)


def sweep_stale() -> list[str]:
    """Namespaces this module made for an owner process that is gone: removed (their names)."""
    gone = []
    for ns in ours():
        try:
            owner = int(ns[len(PREFIX):].split("-")[0])
        except ValueError:
            continue
        if not alive(owner):
            _delete(ns)
            gone.append(ns)
    return gone


class Hosts:
    """``with Hosts(2, offsets_s=[600, 259200]) as h:`` h.run(h.master, argv), h.run(h.worker(0),
    argv), h.worker_ip(i), h.set_link(i, up), h.describe(). Removed on exit, also on error."""

    def __init__(self, k: int, offsets_s: Sequence[float] = (), delay_ms: float = 0.0,
                 jitter_ms: float = 0.0):
        if k < 1:
            raise ValueError("k: at least one worker host")
        self.k = k
        self.offsets_s = [int(o) for o in offsets_s] or [600 * (i + 1) for i in range(k)]
        if len(self.offsets_s) != k:
            raise ValueError(f"offsets_s: one per worker host ({k})")
        self.delay_ms, self.jitter_ms = delay_ms, jitter_ms
        self.name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        self.master = f"{self.name}-m"
        self.made: list[str] = []
        self.procs: list[subprocess.Popen] = []
        self.netem: dict = {"applied": False, "why": None}

    def worker(self, i: int) -> str:
        return f"{self.name}-w{i}"

    def worker_ip(self, i: int) -> str:
        return f"{NET}.{10 + i}"

    def hostname(self, ns: str) -> str:
        return ns[len(PREFIX):]

    # -- build / remove --------------------------------------------------------------------
    def __enter__(self) -> "Hosts":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _add_ns(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self.made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def start(self) -> None:
        why = unavailable()
        if why:
            raise RuntimeError(why)
        sweep_stale()
        m = self.master
        self._add_ns(m)
        _ip("-n", m, "link", "add", "br0", "type", "bridge")
        _ip("-n", m, "addr", "add", f"{MASTER_IP}/24", "dev", "br0")
        _ip("-n", m, "link", "set", "br0", "up")
        missing = netem_missing() if self.delay_ms or self.jitter_ms else None
        self.netem["why"] = missing
        for i in range(self.k):
            w = self.worker(i)
            self._add_ns(w)
            _ip("-n", m, "link", "add", f"h{i}", "type", "veth", "peer", "name", "eth0",
                "netns", w)
            _ip("-n", m, "link", "set", f"h{i}", "master", "br0", "up")
            _ip("-n", w, "addr", "add", f"{self.worker_ip(i)}/24", "dev", "eth0")
            _ip("-n", w, "link", "set", "eth0", "up")
            if (self.delay_ms or self.jitter_ms) and not missing:
                for ns, dev in ((w, "eth0"), (m, f"h{i}")):   # each way: half the delay
                    subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem",
                                    "delay", f"{self.delay_ms / 2}ms",
                                    f"{self.jitter_ms / 2}ms"], check=True,
                                   capture_output=True)
                self.netem["applied"] = True

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
        for ns in reversed(self.made):
            _delete(ns)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)
        self.made = []

    # -- use -------------------------------------------------------------------------------
    def argv(self, ns: str, argv: Sequence[str]) -> list[str]:
        """``argv`` inside namespace ``ns``: its own UTS name, and for a worker host its time
        namespace (CLOCK_MONOTONIC + its offset). exec all the way: the pid is ``argv``'s."""
        un = ["unshare", "--uts"]
        if ns != self.master:
            i = int(ns.rsplit("-w", 1)[1])
            un += ["--time", "--monotonic", str(self.offsets_s[i])]
        return ["ip", "netns", "exec", ns, *un, "--", "sh", "-c",
                'hostname "$0" && exec "$@"', self.hostname(ns), *argv]

    def run(self, ns: str, argv: Sequence[str], **popen) -> subprocess.Popen:
        """Start ``argv`` on host ``ns`` (killed at exit if still running)."""
        p = subprocess.Popen(self.argv(ns, argv), **popen)
        self.procs.append(p)
        return p

    def call(self, ns: str, argv: Sequence[str], timeout: float = 60) -> str:
        """Run ``argv`` on host ``ns`` to its end; its stdout (a failure raises)."""
        return subprocess.run(self.argv(ns, argv), capture_output=True, text=True, check=True,
                              timeout=timeout).stdout

    def set_link(self, i: int, up: bool) -> None:
        """Worker ``i``'s network cut (down) or restored (up), at its end of the veth."""
        _ip("-n", self.worker(i), "link", "set", "eth0", "up" if up else "down")

    def addresses(self) -> list[str]:
        """Every IPv4 address inside the namespaces made here."""
        out = []
        for ns in self.made:
            for link in json.loads(_ip("-j", "-n", ns, "addr").stdout or "[]"):
                out += [a["local"] for a in link.get("addr_info", []) if a.get("family") == "inet"]
        return out

    def owns(self, addr: str) -> bool:
        """``addr`` is loopback or an address of a namespace made here (a permitted target)."""
        return addr.startswith("127.") or addr in self.addresses()

    def describe(self) -> dict:
        return {"k": self.k, "name": self.name, "monotonic_offsets_s": self.offsets_s,
                "netem": dict(self.netem, delay_ms=self.delay_ms, jitter_ms=self.jitter_ms),
                "master_ip": MASTER_IP, "worker_ips": [self.worker_ip(i) for i in range(self.k)]}
