"""target.urls on a Locust worker: each request's replica, picked in the worker process.

    WorkerNode.send ─► Replicas.take(rec): balance.pick(in_flight, turn, balance), the native
        client's pure rule ─► that URL's endpoint, rec.target_url (set before the send, so a
        failed or cancelled request names its replica too) ─► the user's GWire for that URL
        ─► Replicas.done(i) when the request ended
    worker i of n starts its round-robin turns at URL i (as sender process i natively);
    least_in_flight counts THIS process's requests in flight, not the whole run's
    describe() ─► the worker's report ─► meta.json client_connections (run.py sums them)

No gevent, no asyncio: plain counters, changed only by the worker's own greenlets.
"""
from __future__ import annotations

from typing import Optional

from loadgen.client.balance import pick
from loadgen.record import Record


class Replicas:
    """target.urls on one worker process: the replica of each request (balance.pick), the
    process's own in-flight counts and sends (``replicas_for``: None for one URL)."""

    def __init__(self, urls, balance: str, path: str, first_turn: int):
        self.urls = [u.rstrip("/") for u in urls]
        self.paths = [u + path for u in self.urls]
        self.balance = balance
        self.in_flight = [0] * len(self.urls)
        self.sent = [0] * len(self.urls)
        self.turn = first_turn

    def take(self, rec: Record) -> tuple[str, int]:
        i = pick(self.in_flight, self.turn, self.balance)
        self.turn += 1
        rec.target_url = self.urls[i]
        self.in_flight[i] += 1
        self.sent[i] += 1
        return self.paths[i], i

    def done(self, i: int) -> None:
        self.in_flight[i] -= 1

    def describe(self) -> dict:
        return {"balance": self.balance,
                "replicas": [{"url": u, "requests_sent": n} for u, n in zip(self.urls, self.sent)]}


def replicas_for(urls, balance: str, path: str, first_turn: int) -> Optional[Replicas]:
    return Replicas(urls, balance, path, first_turn) if urls and len(urls) > 1 else None
