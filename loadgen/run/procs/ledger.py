"""The one-record ledger of a sender process: loadgen.run.dispatch.Ledger, each record tagged.

    Dispatcher ─► ProcLedger.write / cancel / cancel_many ─► Record.worker = "K" ─► Ledger

``worker`` names the process that sent the request, so analysis can judge each process
(analysis.metrics.saturation: schedule lag and coalesced reads per process).
"""
from __future__ import annotations

from typing import Optional

from loadgen.record import Record
from loadgen.run.dispatch import Ledger


class ProcLedger(Ledger):
    def __init__(self, writer, on_done, tag: str):
        super().__init__(writer, on_done)
        self.tag = tag

    def write(self, rec: Record) -> None:
        rec.worker = self.tag
        super().write(rec)

    def cancelled(self, spec, why: str, sent_at_ns: Optional[int] = None) -> Record:
        rec = Ledger.cancelled(spec, why, sent_at_ns)
        rec.worker = self.tag
        return rec
