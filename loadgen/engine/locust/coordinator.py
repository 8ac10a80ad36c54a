"""The run's conductor inside the Locust master (or the one local Locust process).

    connect (N workers) ─► plan ─► ready ─► runner.start(users) ─► warm ─► warm_done {users}
        ─► go {t0 = now + lead, users_by_worker} ─► done (or dead) ─► master.json ─► quit
Every wait is bounded; a worker whose process exited (on this host) or that sent no heartbeat
for HEARTBEAT_LIVENESS_S (raised from Locust's 3 s: a starved hub is slow, not dead; issue 18)
is "dead" and not waited for. Records that remote workers forward are appended here.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Optional

import gevent
from gevent.event import Event

from loadgen.engine.locust.clock import answer_pings
from loadgen.engine.core.clock import clock_pair, same_processes
from loadgen.engine.locust.request_source import RequestSource
from loadgen.engine.core.plan import Plan, digest, users_for
from loadgen.record import now_ns
from loadgen.run.storage import atomic_write_text
from servers.port_server import alive as pid_alive

T0_LEAD_NS = 300_000_000          # go message to t0: time for every worker to get it
RESEND_NS = 2_000_000_000         # the plan again, to workers not ready yet (see _run)
HEARTBEAT_LIVENESS_S = 30         # silent this long (1-s heartbeats): Locust marks it missing
STOP_WAIT_NS = 15_000_000_000    # after an interrupt, wait this long for workers' last records
MSG_TYPES = ("loadgen_ready", "loadgen_error", "loadgen_warm_done", "loadgen_done",
             "loadgen_records")


class Interrupted(Exception):
    """The run was stopped before the measured phase began."""


def listen(runner, coord: Callable[[], Optional["Coordinator"]]) -> None:
    """The master's handlers (once per process): loadgen messages to ``coord()``, the current
    run's; the workers' clock pings answered (clock.py); Locust's heartbeat liveness raised."""
    import locust.runners as lr   # read when a worker connects and at each heartbeat
    lr.HEARTBEAT_LIVENESS = max(lr.HEARTBEAT_LIVENESS, HEARTBEAT_LIVENESS_S)

    def on(t: str, msg) -> None:
        c = coord()
        if c is not None:
            c.on_message(t, runner.get_worker_index(msg.node_id), msg.data)
    for t in MSG_TYPES:
        runner.register_message(t, lambda environment, msg, t=t, **kw: on(t, msg))
    answer_pings(runner)


class Coordinator:
    def __init__(self, env, sc, n_workers: int, setup: dict, run_dir: Path,
                 connect_timeout_s: float = 60.0, api_key: Optional[str] = None,
                 local: bool = False, start_users: bool = True):
        # n_workers None: the workers connected when the run starts (locust -f, web UI);
        # start_users False: Locust's own UI/command line spawns the users
        self.env, self.sc, self.n, self.run_dir = env, sc, n_workers, Path(run_dir)
        self.start_users = start_users
        self.setup = dict(setup, digest=digest(sc), n_workers=n_workers)
        self.connect_timeout_s = connect_timeout_s
        self.local = local
        self.api_key = api_key
        self.node: Optional[RequestSource] = None
        self.got: dict[str, dict[int, dict]] = {t: {} for t in MSG_TYPES}
        self.finished = Event()
        self.stopping = False
        self.stop_ns = 0
        plan = self.plan = Plan(sc)
        self.users = users_for(sc, plan.schedule, n_workers)
        self.state: dict = {"n_workers": n_workers, "users": self.users, "t0_ns": None,
                            "end_ns": None, "error": None, "interrupted": False,
                            "digest": self.setup["digest"], "workers": {},
                            "role": "local" if local else "master"}
        self._files: dict = {}

    # -- transport ------------------------------------------------------------------------
    def register(self) -> None:
        if not self.local:
            listen(self.env.runner, lambda: self)

    def on_message(self, t: str, index: int, data) -> None:
        if t == "loadgen_records":
            self._append(index, data)
        else:
            self.got[t][index] = data or {}

    def broadcast(self, t: str, data: dict) -> None:
        if not self.local:
            self.env.runner.send_message(t, data)
            return
        if t == "loadgen_plan":
            try:
                self.node = RequestSource(self.sc, 0, 1, data, self.run_dir,
                                       lambda tt, d: self.on_message(tt, 0, d), False,
                                       self.api_key, lambda: self.env.runner.user_count)
                self.on_message("loadgen_ready", 0, {"index": 0, "pid": os.getpid()})
            except Exception as e:
                self.on_message("loadgen_error", 0, {"error": f"{type(e).__name__}: {e}"})
        elif self.node is not None:
            self.node.on_message(t, data)

    def _append(self, index: int, data: dict) -> None:
        for kind in ("records", "sent"):
            lines = data.get(kind) or []
            if not lines:
                continue
            f = self._files.get((kind, index))
            if f is None:
                f = self._files[kind, index] = open(self.run_dir / f"{kind}.worker-{index}.jsonl",
                                                    "a", buffering=1, encoding="utf-8")
            f.write("".join(line + "\n" for line in lines))
            f.flush()

    def alive(self, index: int) -> bool:
        if self.local:
            return True
        ready = self.got["loadgen_ready"].get(index) or {}
        if ready.get("pid") and same_processes(ready):
            if not pid_alive(int(ready["pid"])):   # a worker on this host that exited
                return False
        from locust.runners import STATE_MISSING
        runner = self.env.runner
        for cid, idx in list(runner.worker_indexes.items()):
            if idx == index:
                c = runner.clients.get(cid)
                if c is not None and c.state != STATE_MISSING:
                    return True
        return False

    # -- the protocol -----------------------------------------------------------------------
    def _wait(self, t: str, indices, timeout_s: float,
              resend: Optional[Callable[[], None]] = None) -> None:
        """Until every live worker in ``indices`` answered ``t``; ``resend`` is called every
        RESEND_NS meanwhile (a message a worker dropped: see ``_run``)."""
        deadline = now_ns() + int(timeout_s * 1e9)
        next_resend = now_ns() + RESEND_NS
        while now_ns() < deadline:
            if resend is not None and now_ns() >= next_resend:
                resend()
                next_resend = now_ns() + RESEND_NS
            if self.stopping:
                if t != "loadgen_done":
                    raise Interrupted()
                deadline = min(deadline, self.stop_ns + STOP_WAIT_NS)
            if self.got["loadgen_error"]:
                i, e = next(iter(self.got["loadgen_error"].items()))
                raise RuntimeError(f"worker {i}: {e.get('error')}")
            if all(i in self.got[t] or not self.alive(i) for i in indices):
                return
            gevent.sleep(0.05)
        if self.stopping:
            return                            # interrupted: merge marks what never came back
        missing = [i for i in indices if i not in self.got[t]]
        raise RuntimeError(f"workers {missing} did not answer '{t}' within {timeout_s:g} s")

    def _connect(self) -> list[int]:
        if self.local:
            return [0]
        runner = self.env.runner
        if self.n is None:
            active = runner.clients.ready + runner.clients.spawning + runner.clients.running
            if not active:
                raise RuntimeError("no Locust worker is connected")
            self.n = self.state["n_workers"] = self.setup["n_workers"] = len(active)
            return sorted(runner.get_worker_index(c.id) for c in active)
        deadline = now_ns() + int(self.connect_timeout_s * 1e9)
        while len(runner.clients.ready) < self.n:
            if now_ns() > deadline:
                raise RuntimeError(f"{len(runner.clients.ready)} of {self.n} workers connected "
                                   f"within {self.connect_timeout_s:g} s")
            gevent.sleep(0.05)
        idx = sorted(runner.get_worker_index(c.id) for c in runner.clients.ready)
        if idx != list(range(self.n)):
            raise RuntimeError(f"worker indices {idx}: expected 0..{self.n - 1} (a worker "
                               "reconnected: start the run again)")
        return idx

    def run(self) -> None:
        try:
            try:
                self._run()
            except Interrupted:               # before go: let the workers write what they hold
                self._wait("loadgen_done", list(range(self.n or 0)), STOP_WAIT_NS / 1e9)
        except Exception as e:
            self.state["error"] = f"{type(e).__name__}: {e}"
        finally:
            self.state["end_ns"] = self.state["end_ns"] or now_ns()
            self._final_state()
            for f in self._files.values():
                f.close()
            self.finished.set()

    def _run(self) -> None:
        ld, api = self.sc.load, self.sc.api
        indices = self._connect()
        # A worker counts as connected (client_ready) before its loadgen handlers are registered:
        # a plan sent in between is dropped ("Unknown message type received: loadgen_plan").
        # So the plan goes out again every RESEND_NS until every worker answered; a worker that
        # already has it ignores the repeat.
        self.broadcast("loadgen_plan", dict(self.setup, clock=clock_pair()))
        self._wait("loadgen_ready", indices, 120.0, resend=lambda: self.broadcast(
            "loadgen_plan", dict(self.setup, clock=clock_pair())))
        if self.start_users:
            spawned = Event()
            self.env.events.spawning_complete.add_listener(lambda user_count, **kw: spawned.set())
            self.env.runner.start(self.users, spawn_rate=max(self.users * 20, 1))
            spawned.wait(30.0)
        self.broadcast("loadgen_warm", {})
        self._wait("loadgen_warm_done", indices, 60.0 + ld.warmup_requests * api.timeout_s)
        if not self.start_users:          # Locust's UI / -u chose the user count
            self.state["users"] = getattr(self.env.runner, "target_user_count", None)
        warm = self.got["loadgen_warm_done"]
        ub = [int((warm.get(i) or {}).get("users") or 0) for i in range(self.n or 0)]
        self.state["users_by_worker"] = ub       # a dead worker's 0: the others' users serve
        t0 = now_ns() + T0_LEAD_NS
        self.state["t0_ns"] = t0
        self.broadcast("loadgen_go", {"t0_ns": t0, "users_by_worker": ub})
        self._write_state()
        bound = self.plan.time_bound_s(api)
        self._wait("loadgen_done", indices, bound)
        self.state["end_ns"] = now_ns()

    def interrupt(self, why: str = "run interrupted before the request ended") -> None:
        if self.stopping:
            return
        self.stopping = True
        self.stop_ns = now_ns()
        self.state["interrupted"] = True
        self.broadcast("loadgen_stop", {"why": why})

    def _final_state(self) -> None:
        for i in range(self.n or 0):
            done = self.got["loadgen_done"].get(i)
            if done is not None:
                status = "done"
            elif i not in self.got["loadgen_ready"]:
                status = "never_ready"
            else:
                status = "dead" if not self.alive(i) else "unfinished"
            self.state["workers"][str(i)] = {"status": status, "report": done,
                                             "ready": self.got["loadgen_ready"].get(i)}
        self._write_state()

    def _write_state(self) -> None:
        """master.json: what the loadgen CLI reads (t0, end, users, each worker's status)."""
        atomic_write_text(self.run_dir / "master.json",
                          json.dumps(self.state, indent=2, default=str) + "\n")
