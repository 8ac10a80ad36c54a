"""summary.json ``server_timing``: the server's own spans, joined per request, as figures.

    run_dir/server_spans.json (loadgen.run.server_traces: the receiver's counts and the join's)
    + records (each measured, completed record's ``server_timing`` and client TTFT)
        ─► server_timing_block(run_dir, records):
           status        "ok", or "n/a: <reason>" (no server_traces: no block at all)
           joined / records_traced / joined_share, unmatched_spans, bad_spans {reason: n},
           refused_bodies, dropped_spans, foreign_spans, duplicate_spans
           phases        Stats (ms) of queue, prefill, decode, server TTFT, server E2E, scheduler
           ttft_split    per joined request with a client TTFT: queue + prefill + server_other
                         (server TTFT − queue − prefill) + rest (client TTFT − server TTFT: the
                         network, HTTP and the client) = the client TTFT, exactly;
                         Stats of each part, the median request's split (``p50``) and the mean
                         split of the slowest 1 % by client TTFT (``slowest_1pct``), the
                         splits of the ten slowest requests with their ids (``slowest``)
A bad span never reaches a record (spans.timing refused it: counted in bad_spans with its
reason); a missing phase is null, never 0.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

from analysis.contract.base import ContractError
from analysis.contract.summary_server import ServerSpansFile
from analysis.contract.timing import ttft_ms
from analysis.metrics import figures as m
from analysis.server.spans import ATTRS

FILE = "server_spans.json"
SLOWEST = 10                 # requests in ttft_split.slowest (the report's waterfall)
PARTS = ("queue_ms", "prefill_ms", "server_other_ms", "rest_ms")
COUNTS = ("unmatched_spans", "bad_spans", "refused_bodies", "dropped_spans", "foreign_spans",
          "duplicate_spans")


def split(t, client_ttft: Optional[float]) -> Optional[dict]:
    """One request's TTFT split (ms) from its record's ``server_timing`` (a ServerTiming), or
    None without a client TTFT, a server TTFT, a queue or a prefill time."""
    q, p, s = t.queue_ms, t.prefill_ms, t.server_ttft_ms
    if client_ttft is None or q is None or p is None or s is None:
        return None
    return {"queue_ms": q, "prefill_ms": p, "server_other_ms": s - q - p,
            "rest_ms": client_ttft - s, "client_ttft_ms": client_ttft}


def _read(run_dir: Path):
    """server_spans.json typed; None without one, "unreadable" when it is not its contract."""
    path = Path(run_dir) / FILE
    if not path.is_file():
        return None
    try:
        return ServerSpansFile.read_file(path)
    except (ContractError, OSError, ValueError):
        return "unreadable"


def server_timing_block(run_dir: str | Path, records) -> Optional[dict]:
    """See the module doc; None when the run had no ``server_traces``."""
    info = _read(Path(run_dir))
    if info is None:
        return None
    done = m.completed(m.measured(records))
    traced = [r for r in done if getattr(r, "trace_id", None)]
    joined = [(r, r.server_timing) for r in traced if r.server_timing is not None]
    out: dict[str, Any] = {"status": "ok", "records_traced": len(traced), "joined": len(joined),
                           "joined_share": len(joined) / len(traced) if traced else None}
    unreadable = info == "unreadable"
    out.update({k: None if unreadable else getattr(info, k) for k in COUNTS})
    if unreadable:
        out["status"] = f"n/a: {FILE} is not readable JSON"
    elif not traced:
        out["status"] = ("n/a: no record carries a trace id (api.traceparent is off)"
                         if info.traceparent is False
                         else "n/a: no completed measured request carries a trace id")
    elif not joined:
        bad = sum(info.bad_spans.values())
        out["status"] = (f"n/a: the server sent no usable span ({bad} refused as bad)" if bad
                         else "n/a: the server sent no span for these requests (is its OTLP "
                              "export pointed at the receiver? docs/server-traces.md)")
    out["phases"] = {k: m.stats([getattr(t, k) for _, t in joined]) for k in ATTRS}
    rows = []
    for r, t in joined:
        row = split(t, ttft_ms(r))
        if row is not None:
            rows.append({**row, "id": r.id})
    out["ttft_split"] = _split_block(rows)
    return out


def _split_block(rows: list[dict]) -> dict:
    out: dict[str, Any] = {k: m.stats([r[k] for r in rows]) for k in PARTS}
    if not rows:
        out["p50"] = out["slowest_1pct"] = None
        out["slowest"] = []
        return out
    ranked = sorted(rows, key=lambda r: r["client_ttft_ms"])
    out["p50"] = ranked[(len(ranked) - 1) // 2]          # the median request (lower)
    tail = ranked[len(ranked) - max(1, math.ceil(len(ranked) / 100)):]
    out["slowest_1pct"] = {k: sum(r[k] for r in tail) / len(tail)
                           for k in (*PARTS, "client_ttft_ms")}
    out["slowest_1pct"]["requests"] = len(tail)
    out["slowest"] = ranked[-SLOWEST:][::-1]              # the waterfall: slowest first
    return out
