"""A Locust worker's ledger: the one ledger (loadgen.engine.core.ledger: each id once, the
worker's tag, a failed write stops it) writing its lines when the gevent hub is idle, on the
master's clock, beside the send journal (engine/core/journal.py's lines, sent.worker-i.jsonl).

    write(rec)  the id taken at once, the record rebased (engine.core.clock.rebase) and queued;
                when the hub idles (idle.py) up to WRITE_BATCH queued records are encoded ONCE
                each (Record.to_json, redacted) and written in ONE write; close() writes what
                waits (a worker killed outright loses only those: the merge owes them);
                output.records: arrow: records.worker-i.arrow (loadgen.record.store_writer)
    forward     remote workers: both files' new lines also go to the master in batches
                (Locust's messages, every FORWARD_EVERY_S), written there by the coordinator
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import gevent

from loadgen.engine.locust.idle import IdleQueue
from loadgen.record import Record, store_writer
from loadgen.redact import redact
from loadgen.engine.core.clock import rebase
from loadgen.engine.core.journal import journal_line
from loadgen.engine.core.ledger import Ledger

FORWARD_EVERY_S = 0.1
WRITE_BATCH = 16          # records encoded and written per idle slot (one write, ~0.3 ms)


class WorkerLedger(Ledger):
    def __init__(self, records_dir: Path, index: int, shift: int, forward: bool,
                 send_msg: Callable[[str, dict], None], arrow: bool = False):
        self.index, self.shift, self.forward, self.send_msg = index, shift, forward, send_msg
        self.idle = IdleQueue()                      # record lines wait for an idle hub
        records_dir.mkdir(parents=True, exist_ok=True)
        self.arrow = arrow                           # output.records: arrow (issue 42)
        super().__init__(store_writer(records_dir / f"records.worker-{index}."
                                      f"{'arrow' if arrow else 'jsonl'}"), tag=str(index))
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
        line = journal_line(rec, self.shift)
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
        recs = self.pending[:WRITE_BATCH]
        del self.pending[:WRITE_BATCH]
        if self.pending:
            self.idle.put(self._lines)
        lines = [redact(r.to_json()) for r in recs] if self.forward or not self.arrow else []
        if self.forward:
            self.batch_rec.extend(lines)
        self.writer.write_many(recs) if self.arrow else self.writer.write_lines(lines)

    def close(self) -> None:
        self.idle.close()                        # every record line still waiting, now
        self.flush_forward()
        self.closed = True
        self.writer.close()
        self.journal_file.close()

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
