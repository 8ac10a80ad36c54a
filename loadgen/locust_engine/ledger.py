"""A Locust worker's ledger: the one ledger (loadgen.run.senders.ledger: each id once, the
worker's tag, a failed write stops it) writing its lines when the hub is idle, on the master's
clock, with the send journal.

    journal(rec)  just before the send ─► locust/sent.worker-i.jsonl (id, phase, times, token
                  counts, session_id / turn): what merge.py owes a record when no record comes
    write(rec)    a finished (or cancelled) request ─► locust/records.worker-i.jsonl, once per id
                  (times shifted onto the master's clock: clock.rebase); the id is taken at
                  once, the record waits in ``pending``; when the hub is idle (idle.py: not in
                  the middle of a decode step's reads) up to WRITE_BATCH waiting records are
                  encoded ONCE each (Record.to_json, redacted) and written in ONE write, the
                  same lines forwarded; close() writes what waits; a worker killed outright
                  loses only those waiting lines, which merge.py then writes as cancelled,
                  "worker i died")
    snapshot(rec, why)   an unfinished request's record as "cancelled" (what arrived kept)
    forward       remote workers: both files' new lines also go to the master in batches
                  (Locust's messages, every FORWARD_EVERY_S), written there by the coordinator

gevent only for the forwarding loop; the request source (request_source.py) decides what to
write and when.
"""
from __future__ import annotations

import msgspec.structs
import json
from pathlib import Path
from typing import Callable

import gevent

from loadgen.client import request
from loadgen.locust_engine.idle import IdleQueue
from loadgen.record import Record, RecordWriter, now_ns
from loadgen.redact import redact
from loadgen.run.senders.clock import rebase
from loadgen.run.senders.ledger import Ledger

FORWARD_EVERY_S = 0.1
WRITE_BATCH = 16          # records encoded and written per idle slot (one write, ~0.3 ms)


class WorkerLedger(Ledger):
    def __init__(self, records_dir: Path, index: int, shift: int, forward: bool,
                 send_msg: Callable[[str, dict], None]):
        self.index, self.shift, self.forward, self.send_msg = index, shift, forward, send_msg
        self.idle = IdleQueue()                      # record lines wait for an idle hub
        records_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(RecordWriter(records_dir / f"records.worker-{index}.jsonl"),
                         tag=str(index))
        self.pending: list[Record] = []              # taken, waiting for an idle slot
        self.journal_file = open(records_dir / f"sent.worker-{index}.jsonl", "a", buffering=1,
                                 encoding="utf-8")
        self.batch_rec: list[str] = []
        self.batch_sent: list[str] = []
        self.sent_count = 0
        self.closed = False
        if forward:
            gevent.spawn(self._forward_loop)

    def journal(self, rec: Record) -> None:
        self.sent_count += 1
        sched = rec.scheduled_at_ns
        line = json.dumps({"id": rec.id, "phase": rec.phase,
                           "scheduled_at_ns": sched + self.shift if sched is not None else None,
                           "sent_at_ns": now_ns() + self.shift,
                           "requested_output_tokens": rec.requested_output_tokens,
                           "workload_prompt_tokens": rec.workload_prompt_tokens,
                           "session_id": rec.session_id, "turn": rec.turn})
        self.journal_file.write(line + "\n")
        if self.forward:
            self.batch_sent.append(line)

    def write(self, rec: Record) -> bool:
        """Take ``rec`` unless its id was taken already (or the ledger closed)."""
        return not self.closed and super().write(rec)

    def _put(self, rec: Record) -> None:
        rebase(rec, self.shift)
        self.pending.append(rec)
        if len(self.pending) == 1:                   # the first one waiting: one idle item
            self.idle.put(self._lines)

    def _lines(self) -> None:
        """Up to WRITE_BATCH waiting records: each encoded once (Record.to_json: msgspec, as for
        every engine; redacted as RecordWriter.write does), one write; the rest wait for the
        next idle slot."""
        recs = self.pending[:WRITE_BATCH]
        del self.pending[:WRITE_BATCH]
        if self.pending:
            self.idle.put(self._lines)
        lines = [redact(r.to_json()) for r in recs]
        if self.forward:
            self.batch_rec.extend(lines)
        self.writer.write_lines(lines)

    @staticmethod
    def snapshot(rec: Record, why: str) -> Record:
        """A copy of ``rec`` as "cancelled" (an ok one stays ok), counts derived from what
        arrived; one never sent says so."""
        snap = msgspec.structs.replace(rec, chunks=list(rec.chunks))
        if snap.status != "ok":
            if snap.sent_at_ns is None:           # a user held it, waiting for its time
                why = f"scheduled but never sent: {why.split(' before ')[0]}"
            snap.status, snap.error_kind, snap.error = "cancelled", "cancelled", why
        if snap.end_at_ns is None:
            snap.end_at_ns = now_ns()
        request.finish(snap, _Tally(snap), snap.workload_prompt_tokens)
        return snap

    def close(self) -> None:
        self.idle.close()                        # every record line still waiting, now
        self.flush_forward()
        self.closed = True
        self.writer.close()
        self.journal_file.close()

    # -- remote workers: records also travel through Locust's messages -----------------------
    def flush_forward(self) -> None:
        if self.batch_rec or self.batch_sent:
            recs, sent = self.batch_rec, self.batch_sent
            self.batch_rec, self.batch_sent = [], []
            self.send_msg("loadgen_records", {"index": self.index, "records": recs, "sent": sent})

    def _forward_loop(self) -> None:
        while not self.closed:
            gevent.sleep(FORWARD_EVERY_S)
            if not self.closed:
                self.flush_forward()


class _Tally:
    """A finished StreamTally's view of a record (for re-deriving a cancelled snapshot)."""

    def __init__(self, rec: Record):
        self.completion_tokens = rec.usage_output_tokens
        self.prompt_tokens = rec.prompt_tokens if rec.prompt_tokens_source == "usage" else None
        self.finish_reason = rec.finish_reason
        self.chars = rec.output_chars or 0
