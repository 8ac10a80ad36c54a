"""The ``cancelled`` record of a request that never finished: built once, written fast.

    record(item, why, worker, end_ns)   the Record (Ledger.cancelled, merge's owed ids), built by
                                        client/attempt.cancelled_record (the one constructor)
    Lines(worker, end_ns).line(item, why)
        ─► one JSON line (redacted, no newline), exactly ``redact(record(...).to_json())``,
           from a template per (phase, why): the numbers spliced in, a fraction of a µs a line
           (an interrupted 10^6-request plan is recorded in about a second, not half a minute)

``item`` is anything with ``id`` and ``phase`` and, optionally, ``scheduled_at_ns``,
``sent_at_ns``, ``max_tokens``, ``prompt_tokens``, ``session_id``, ``turn`` and ``why`` (its own
reason, over the sender's): a RequestSpec, planned.Unbuilt, merge.Owed. A session turn (its id
is text) takes the slow road through Record. Used by the ledger's bulk cancel, the never-sent
remainder of a plan and the merge of both engines: one rule for every cancelled line.
"""
from __future__ import annotations

from typing import Optional

from loadgen.client.attempt import cancelled_record
from loadgen.record import Record
from loadgen.redact import redact

# template marks: numbers no real field holds (ids, ns times and token counts are far smaller)
_MARKS = (918273645546372819, 827364554637281991, 736455463728199182, 645546372819918273,
          554637281991827364, 463728199182736455)
_ID, _AT, _SENT, _END, _MAXT, _PT = _MARKS
_FIELD = {_ID: "id", _AT: "scheduled_at_ns", _SENT: "sent_at_ns", _MAXT: "max_tokens",
          _PT: "prompt_tokens", _END: None}      # the item's attribute spliced at each mark


def record(item, why: str, worker: Optional[str], end_ns: Optional[int]) -> Record:
    """The cancelled Record of ``item`` (its own ``why`` first)."""
    g = getattr
    return cancelled_record(item.id, item.phase, g(item, "scheduled_at_ns", None), end_ns,
                            g(item, "why", None) or why, g(item, "max_tokens", None),
                            g(item, "prompt_tokens", None), g(item, "sent_at_ns", None), worker,
                            g(item, "session_id", None), g(item, "turn", None))


class Lines:
    """Cancelled record lines of one sender (``worker``) ended at ``end_ns``."""

    def __init__(self, worker: Optional[str], end_ns: Optional[int]):
        self.worker, self.end_ns = worker, end_ns
        self._templates: dict = {}

    def _template(self, phase: str, why: str) -> tuple:
        text = redact(cancelled_record(_ID, phase, _AT, _END, why, _MAXT, _PT, _SENT,
                                       self.worker).to_json())
        found = sorted((text.index(str(m)), m) for m in _MARKS)
        pieces, pos = [], 0
        for where, m in found:
            pieces.append(text[pos:where])
            pos = where + len(str(m))
        pieces.append(text[pos:])
        return pieces[0], tuple((_FIELD[m], piece) for (_, m), piece in zip(found, pieces[1:]))

    def line(self, item, why: str) -> str:
        g = getattr
        if g(item, "session_id", None) is not None or g(item, "turn", None) is not None:
            return redact(record(item, why, self.worker, self.end_ns).to_json())
        why = g(item, "why", None) or why
        key = (item.phase, why)
        t = self._templates.get(key)
        if t is None:
            t = self._templates[key] = self._template(item.phase, why)
        head, rest = t
        end = self.end_ns
        out = [head]
        for name, piece in rest:
            v = end if name is None else g(item, name, None)
            out.append("null" if v is None else str(int(v)))
            out.append(piece)
        return "".join(out)
