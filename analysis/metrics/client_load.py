"""The client's own load, as the run recorded it, and the limits it is judged against.

    meta ``client_cpu`` (a number, or {"fraction" | "mean"}) ─► client_cpu ─► share of a core or None
    CPU_SATURATION, LOOP_LAG_MS ─► analysis.metrics.slo (the verdict's checks and notes)
                                 ─► analysis.metrics.saturation (the saturation figures' limits)

Both the verdict and the saturation figures read these; neither owns them (so neither imports the
other for them). Pure, no I/O.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.meta import RunMeta

# Client CPU (fraction of one core over the run) at or above this counts as saturated.
CPU_SATURATION = 0.9
# p99 event-loop lag of the client (meta.client_load.loop_lag_ms_p99) above this: saturated where
# stamps are user-space (analysis.metrics.saturation; kernel receive stamps do not move with it).
LOOP_LAG_MS = 5.0


def client_cpu(meta: dict | RunMeta) -> Optional[float]:
    """The client's CPU share of one core (``meta.client_cpu``: a number, or an older writer's
    dict with ``fraction`` / ``mean``, read as the number by RunMeta), or None when it was not
    recorded."""
    cpu = RunMeta.read(meta).client_cpu
    return float(cpu) if cpu is not None else None
