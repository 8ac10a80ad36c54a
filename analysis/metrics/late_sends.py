"""Why sends were late, where the records say it: the in-flight cap.

    records (scheduled_at_ns, sent_at_ns, end_at_ns; measured ones judged, every sent one
    counted in flight) + meta ``in_flight_cap`` + the schedule-lag limit
        ─► held_by_cap(...) ─► {"late", "held", "cap"} or None
        ─► analysis.metrics.saturation: a late send the cap explains is the cap's, not the
           client's or the host's (its warning and lag_cause name the cap)

A measured request is *late* when sent_at − scheduled_at exceeds the limit. It was *held by the
cap* when, at its scheduled time, ``cap`` requests were already in flight (sent by that time
and not yet ended): it could not be sent until one ended, so it waited for a free slot, whatever
the host or the client did. The cap explains the late sends when it held at least half of them
(``EXPLAINS``). With several sender processes each holds a share of the cap; the count compares
the run-wide in-flight with the run-wide cap, so it is a lower bound there. No cap (meta
``in_flight_cap`` null) or no late send: None.
Pure numpy, no I/O.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract.meta import RunMeta
from analysis.metrics import figures as m

EXPLAINS = 0.5          # share of the late sends the cap held for the cap to be their cause


def held_by_cap(records, meta: dict | RunMeta, limit_ms: float) -> Optional[dict]:
    """{"late": n, "held": k, "cap": c, "explains": bool} (see the module doc), or None."""
    cap = RunMeta.read(meta).in_flight_cap
    if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
        return None
    tab, meas, _, _ = m.selections(records)
    sched, has_sched = tab.stamp("scheduled_at_ns")
    sent, has_sent = tab.stamp("sent_at_ns")
    end, has_end = tab.stamp("end_at_ns")
    judged = meas & has_sched & has_sent
    late = judged & ((sent - sched) > limit_ms * 1e6)
    n_late = int(late.sum())
    if not n_late:
        return None
    starts = np.sort(sent[has_sent])
    ends = np.sort(end[has_sent & has_end])       # a sent request without an end stays in flight
    t = sched[late]
    in_flight = (np.searchsorted(starts, t, side="right")     # a slot handed on at t: taken
                 - np.searchsorted(ends, t, side="right"))
    held = int((in_flight >= cap).sum())
    return {"late": n_late, "held": held, "cap": cap, "explains": held >= EXPLAINS * n_late}


def cap_text(c: dict) -> str:
    """The cause in words: how many late sends waited for a slot under which cap."""
    return (f"{c['held']} of {c['late']} late sends were due while {c['cap']} requests were "
            f"already in flight: they waited for a free slot under the in-flight cap "
            f"(load.max_concurrency / load.concurrency {c['cap']}), not for the host or the client")
