"""A request still in flight when its sender stops (an interrupt, a drain timeout, a worker
told to quit): its Record as it stands, settled as "cancelled". Pure; used by the Locust
worker's request source, whose users may still hold the request (the record written is a copy).

    snapshot(rec, why)   a copy of ``rec``: status "cancelled" (an answer already complete
                         stays "ok"), error ``why`` ("scheduled but never sent: ..." for one
                         that never left), end now when unset, and the counts derived from
                         the chunks that arrived by the native client's rule (request.finish)
"""
from __future__ import annotations

import msgspec.structs

from loadgen.client.request import finish
from loadgen.record import Record, now_ns


def snapshot(rec: Record, why: str) -> Record:
    snap = msgspec.structs.replace(rec, chunks=list(rec.chunks))
    if snap.status != "ok":
        if snap.sent_at_ns is None:           # a user held it, waiting for its time
            why = f"scheduled but never sent: {why.split(' before ')[0]}"
        snap.status, snap.error_kind, snap.error = "cancelled", "cancelled", why
    if snap.end_at_ns is None:
        snap.end_at_ns = now_ns()
    finish(snap, _Tally(snap), snap.workload_prompt_tokens)
    return snap


class _Tally:
    """A finished StreamTally's view of a record (for re-deriving a cancelled snapshot)."""

    def __init__(self, rec: Record):
        self.completion_tokens = rec.usage_output_tokens
        self.prompt_tokens = rec.prompt_tokens if rec.prompt_tokens_source == "usage" else None
        self.finish_reason = rec.finish_reason
        self.chars = rec.output_chars or 0
