"""The gevent side of the clock: the ping-pong over Locust's messages that measures a worker's
offset (the estimate from its samples is engine.core.clock's, every sender's), paced sleeps (the
native dispatcher's rule: nap, then yield-spin the last ms) and hub lag with process CPU.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

import gevent

from loadgen.client.load_monitor import LoadWindow, pct
from loadgen.record import now_ns
from loadgen.engine.core.clock import nap_s

PING_TRIES = 16             # ping-pongs per worker at plan time
PING_GAP_S = 0.01           # between two of them
PING_WAIT_S = 1.0           # one unanswered this long: given up (the rest are still tried)


def answer_pings(runner) -> None:
    """On the master: answer every worker's ``loadgen_ping`` at once with the master's clock."""
    def on(environment, msg, **kw):
        runner.send_message("loadgen_pong", dict(msg.data or {}, master_ns=now_ns()),
                            client_id=msg.node_id)
    runner.register_message("loadgen_ping", on)


class Pinger:
    """On a worker: ping-pongs over Locust's messages (``send(type, data)`` to the master)."""

    def __init__(self, runner, send: Callable[[str, dict], None]):
        self.send = send
        self.samples: list[tuple[int, int, int]] = []
        self._waiting: Optional[tuple[int, int, Any]] = None      # (seq, t_send, Event)
        runner.register_message("loadgen_pong", self._on_pong)

    def _on_pong(self, environment, msg, **kw) -> None:
        t = now_ns()
        w, d = self._waiting, msg.data or {}
        if w is not None and d.get("seq") == w[0] and d.get("t_ns") == w[1]:
            self.samples.append((w[1], int(d["master_ns"]), t))
            w[2].set()

    def measure(self, tries: int = PING_TRIES) -> list[tuple[int, int, int]]:
        from gevent.event import Event
        for k in range(tries):
            ev = Event()
            t = now_ns()
            self._waiting = (k, t, ev)
            self.send("loadgen_ping", {"seq": k, "t_ns": t})
            answered = ev.wait(PING_WAIT_S)
            self._waiting = None
            if not answered:              # a master that does not answer pings: wall clock
                break
            gevent.sleep(PING_GAP_S)
        return list(self.samples)


def sleep_until(deadline_ns: int, stopped: Callable[[], bool]) -> bool:
    """engine.core.clock's nap rule, gevent's sleep; True if ``stopped()`` became true first."""
    while not stopped():
        nap = nap_s(deadline_ns, now_ns())
        if nap is None:
            return False
        gevent.sleep(nap)
    return True


class LagSampler(LoadWindow):
    """gevent hub lag (how late a 100 ms sleep wakes up) and process CPU over a window (the
    window and its figures: client.load_monitor.LoadWindow, the asyncio senders' too)."""

    g = None

    def start(self) -> None:
        self.start_window()
        self.g = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            t = time.perf_counter()
            gevent.sleep(self.interval_s)
            self._lags_ms.append((time.perf_counter() - t - self.interval_s) * 1e3)

    def stop(self) -> dict:
        if self.g is None:
            return {}
        self.g.kill(block=False)
        cpu, wall, util, lags = self.window()     # unrounded, as the reports always were
        return {"cpu_s": cpu, "wall_s": wall, "cpu_util": util, "loop_lag_ms_p99": pct(lags, 99),
                "loop_lag_ms_max": lags[-1] if lags else None}
