"""The Locust user: takes the next request from its worker's RequestSource (NODE), sends it
through its GWire for the URL (client.gevent_wire: one keep-alive connection each, the one
HTTP/1.1 exchange, kernel receive stamps, the Record filled by the native client's rules:
gevent_wire.client.execute) and fires one Locust ``request`` event (E2E, for Locust's UI
only; loadgen's metrics come from the records). No asyncio here (a gevent-patched process).
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import gevent
from locust import User, constant, task

from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import DEFAULT_LIMITS, Limits
from loadgen.client.gevent_wire.conn import process_stamps
from loadgen.client.gevent_wire.client import GWire, execute
from loadgen.record import Record, now_ns

# the process-wide source of requests (request_source.RequestSource), set before spawn
NODE: Optional[Any] = None


class LLMUser(User):
    """Takes the next request from ``NODE`` (its worker's slice), sends it, hands back a Record.
    Closed loop in concurrency mode (stages: NODE holds it while no stage needs it); in
    server/offline mode NODE paces it to the schedule; sessions: it plays one whole session."""

    wait_time = constant(0)
    host = "http://127.0.0.1"            # NODE sets the scenario's base URL before spawning
    network_timeout = 600.0              # NODE: api.timeout_s (send to last byte)
    connection_timeout: Optional[float] = 30.0   # NODE: api.connect_timeout_s
    follow_redirects = "never"           # NODE: api.follow_redirects

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.wires: dict[str, GWire] = {}    # one keep-alive connection per URL (target.urls)
        self.slot: Optional[int] = None      # staged closed loop: this worker's user index
        self.sessions_played = 0             # sessions: the first one starts at t0

    def on_stop(self) -> None:
        for w in self.wires.values():
            w.close()

    @task
    def next_request(self) -> None:
        node = NODE
        if node is None:
            gevent.sleep(0.05)
            return
        node.serve(self)

    def _wire(self, url: str, timeout_s: float, limits: Limits) -> GWire:
        w = self.wires.get(url)
        if w is None or (w.timeout_s, w.limits) != (timeout_s, limits):
            if w is not None:
                w.close()
            w = self.wires[url] = GWire(url, timeout_s, self.connection_timeout, limits,
                                        self.follow_redirects, process_stamps())
        return w

    def send(self, url: str, headers: dict, data: bytes, stream: bool, rec: Record,
             tally: StreamTally, timeout_s: float, limits: Limits = DEFAULT_LIMITS,
             hangup=None) -> None:
        """``tally``: request.Shape.tally's (the native client's: a StreamTally, or for
        api.endpoint responses a ResponsesTally; a session turn's keeps the answer's text)."""
        execute(self._wire(url, timeout_s, limits), headers, data, stream, rec, tally, hangup)
        e2e = ((rec.end_at_ns or now_ns()) - (rec.sent_at_ns or now_ns())) / 1e6
        exc = None if rec.status == "ok" else RuntimeError(f"{rec.error_kind}: {rec.error}")
        event = functools.partial(
            self.environment.events.request.fire,
            request_type="POST", name=url.rsplit("/v1", 1)[-1], response_time=e2e,
            response_length=rec.output_chars or 0, exception=exc, context={}, response=None)
        later = getattr(NODE, "later", None)     # Locust's statistics wait for an idle hub
        if later is not None:
            later(event)
        else:
            event()
