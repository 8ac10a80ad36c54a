"""Several replicas, one client: the requests of a run spread over ``target.urls``.

    target.urls [u0, u1, ...] + target.balance
        ─► Balanced: one ``Client`` per URL (its own transport, pool and stamps), opened together
        ─► execute(spec, rec): pick(in_flight, turn, balance) ─► Client[i].execute
                               rec.target_url = u_i (set before the send, so a cancelled or
                               failed request names its replica too)

``pick`` is pure: round_robin takes the URLs in the order requests are sent (the n-th send goes
to URL n mod k, whatever the others are doing); least_in_flight takes the URL with the fewest
requests in flight, ties going to the first such URL at or after the round-robin turn (so an
idle fleet is still visited in turn). The in-flight counts are the client's own: requests sent
and not yet ended, as the load generator sees them. The asyncio client is imported only where
used, so the Locust workers (gevent, no asyncio) import ``pick`` from here too.

``Balanced`` has the methods of ``Client`` that the load loops and the runner use
(``new_record``, ``execute``, ``describe``, ``transport_info``, ``first_response_headers``),
so the dispatcher neither knows nor cares how many replicas there are.
"""
from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING, Optional, Sequence

from loadgen.record import Record

if TYPE_CHECKING:     # hints only: the asyncio client is imported where it is used
    from loadgen.client.http_client import ClientConfig, RequestSpec

BALANCES = ("round_robin", "least_in_flight")


def pick(in_flight: Sequence[int], turn: int, balance: str) -> int:
    """The index of the URL for the next request. ``turn``: how many requests were sent before."""
    k = len(in_flight)
    start = turn % k
    if balance == "round_robin":
        return start
    if balance != "least_in_flight":
        raise ValueError(f"target.balance: expected one of {BALANCES}, got {balance!r}")
    low = min(in_flight)
    for j in range(k):
        i = (start + j) % k
        if in_flight[i] == low:
            return i
    return start      # unreachable: some URL holds the minimum


class Picker:
    """The replica of each request, as one sender sees it (pure: the asyncio ``Balanced`` and
    the Locust worker both keep their counts here): ``take(rec)`` picks (``pick``), sets
    ``rec.target_url`` and counts it in flight; ``done(i)`` when it ended."""

    def __init__(self, urls: Sequence[str], balance: str, first_turn: int = 0):
        if balance not in BALANCES:
            raise ValueError(f"target.balance: expected one of {BALANCES}, got {balance!r}")
        self.urls = [u.rstrip("/") for u in urls]
        self.balance = balance
        self.in_flight = [0] * len(self.urls)
        self.sent = [0] * len(self.urls)
        self.turn = first_turn        # sender process k of N starts its turns at URL k

    def take(self, rec: Record) -> int:
        i = pick(self.in_flight, self.turn, self.balance)
        self.turn += 1
        rec.target_url = self.urls[i]
        self.in_flight[i] += 1
        self.sent[i] += 1
        return i

    def done(self, i: int) -> None:
        self.in_flight[i] -= 1

    def describe(self) -> dict:
        return {"balance": self.balance,
                "replicas": [{"url": u, "requests_sent": n} for u, n in zip(self.urls, self.sent)]}


class Balanced:
    """``async with Balanced(cfg, urls, balance, max_connections) as c: await c.execute(spec)``.

    ``max_connections`` bounds each replica's pool (any replica may get every request in flight
    under least_in_flight). ``cfg.base_url`` is ignored: each Client gets its URL."""

    def __init__(self, cfg: ClientConfig, urls: Sequence[str], balance: str,
                 max_connections: Optional[int], transport: Optional[str] = None,
                 first_turn: int = 0):
        if not urls:
            raise ValueError("target.urls: give at least one URL")
        if balance not in BALANCES:
            raise ValueError(f"target.balance: expected one of {BALANCES}, got {balance!r}")
        from loadgen.client.http_client import Client
        self.picker = Picker(urls, balance, first_turn)
        self.urls, self.balance = self.picker.urls, balance
        self.clients = [Client(replace(cfg, base_url=u), max_connections, transport)
                        for u in self.urls]
        self._stack: Optional[contextlib.AsyncExitStack] = None

    async def __aenter__(self) -> "Balanced":
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            for c in self.clients:
                await stack.enter_async_context(c)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()

    @staticmethod
    def new_record(spec: RequestSpec) -> Record:
        from loadgen.client.http_client import Client
        return Client.new_record(spec)

    async def execute(self, spec: RequestSpec, rec: Optional[Record] = None) -> Record:
        if rec is None:
            rec = self.new_record(spec)
        i = self.picker.take(rec)
        try:
            return await self.clients[i].execute(spec, rec)
        finally:
            self.picker.done(i)

    @property
    def first_response_headers(self) -> Optional[dict]:
        for c in self.clients:
            if c.first_response_headers is not None:
                return c.first_response_headers
        return None

    def describe(self) -> dict:
        """meta.json ``client_connections``: the sum over replicas, and each replica's share."""
        each = [c.describe() for c in self.clients]
        return {"stale_connection_retries": sum(d["stale_connection_retries"] for d in each),
                "reuse_connections": all(d["reuse_connections"] for d in each),
                **self.picker.describe()}

    def transport_info(self) -> dict:
        """meta.json ``client_transport``: the replicas' transports described as one (counts such
        as coalesced reads and connections opened summed; a stamp source that differs: mixed;
        each replica's own description under ``replicas``)."""
        each = [c.transport_info() for c in self.clients]
        out = dict(each[0])
        for key, v in each[0].items():
            if isinstance(v, int) and not isinstance(v, bool):
                vals = [d.get(key) for d in each]
                if all(isinstance(x, int) for x in vals):
                    out[key] = sum(vals)
        if len({d.get("stamp_source") for d in each}) > 1:
            out["stamp_source"] = "mixed"
        out["replicas"] = [{"url": u, **d} for u, d in zip(self.urls, each)]
        return out


def open_client(cfg: ClientConfig, urls: Optional[Sequence[str]], balance: str,
                max_connections: Optional[int], first_turn: int = 0):
    """A ``Client`` for one URL (``cfg.base_url``), a ``Balanced`` one for several. Each sender
    process (client.processes) balances its own requests, process k starting at URL k."""
    if urls and len(urls) > 1:
        return Balanced(cfg, urls, balance, max_connections, first_turn=first_turn)
    from loadgen.client.http_client import Client
    return Client(cfg, max_connections)
