"""`compare`'s "where the TTFT moved": the server's phases side by side, and the one that moved.

    each run's summary server_timing.ttft_split (from the server's own spans, docs/server-traces.md)
        ─► per later run against the first, for the median request (``p50``) and the slowest 1 %
           (mean): the change of each part — queue, prefill, the server's other time, the rest
           (client TTFT − server TTFT: network, HTTP, client) — and of the client TTFT
        ─► ``moved``: the part whose change is largest in size, its share of the TTFT's change
        ─► blocks: a table per pair and one sentence naming the phase

A run without joined spans (no ``server_traces``, none joined, a repeat series' mean) gives no
figure: the section says which run lacks them, never a guess. Pure: summaries in, dicts out.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.summary import Summary
from analysis.contract.summary_server import TtftParts
from analysis.report.render import Block

PARTS = (("queue_ms", "queue"), ("prefill_ms", "prefill"), ("server_other_ms", "server other"),
         ("rest_ms", "rest (network, HTTP, client)"))
VIEWS = (("p50", "median request"), ("slowest_1pct", "slowest 1 % (mean)"))


def moved(a: Optional[TtftParts], b: Optional[TtftParts]) -> Optional[dict]:
    """Each part's change a ─► b (ms), the client TTFT's, and the part that moved most; None when
    a part is missing on either side."""
    if a is None or b is None:
        return None
    delta = {}
    for k, _ in PARTS + (("client_ttft_ms", ""),):
        va, vb = getattr(a, k), getattr(b, k)
        if va is None or vb is None:
            return None
        delta[k] = vb - va
    k, label = max(PARTS, key=lambda p: abs(delta[p[0]]))
    total = delta["client_ttft_ms"]
    return {"delta_ms": delta, "part": k, "label": label,
            "share": delta[k] / total if total else None}


def phase_changes(summaries: list, runs: list[str]) -> dict:
    """{"traced": some run has a joined split, "missing": [runs without one],
    "pairs": [{a, b, views: {p50 | slowest_1pct: moved(...)}}] (empty when any run lacks it)}."""
    splits = []
    for s in summaries:
        st = Summary.read(s).server_timing
        splits.append(st.ttft_split if st is not None and st.status == "ok" else None)
    missing = [r for r, sp in zip(runs, splits) if sp is None or sp.p50 is None]
    pairs = [] if missing else [
        {"a": runs[0], "b": runs[i],
         "views": {v: moved(getattr(splits[0], v), getattr(splits[i], v)) for v, _ in VIEWS}}
        for i in range(1, len(runs))]
    return {"traced": len(missing) < len(runs), "missing": missing, "pairs": pairs}


def sentence(pair: dict) -> str:
    m = pair["views"]["p50"]
    if m is None:
        return f"{pair['b']} against {pair['a']}: the median request's split is incomplete."
    share = "" if m["share"] is None else f", {100 * m['share']:.0f} % of the TTFT's change"
    return (f"{pair['b']} against {pair['a']}: the median request's TTFT moved "
            f"{m['delta_ms']['client_ttft_ms']:+.2f} ms; the phase that moved most: "
            f"{m['label']} ({m['delta_ms'][m['part']]:+.2f} ms{share}).")


def phase_blocks(phases: Optional[dict]) -> list[Block]:
    """The compare report's section (nothing when no run had server traces)."""
    if not phases or not phases["traced"]:
        return []
    out: list[Block] = [("h", "Where the TTFT moved (the server's spans)")]
    if phases["missing"]:
        return out + [("p", "Not compared: no joined server spans in "
                            + ", ".join(phases["missing"]) + " (server_traces).")]
    for pair in phases["pairs"]:
        out.append(("p", sentence(pair)))
        rows = []
        for k, label in PARTS + (("client_ttft_ms", "client TTFT"),):
            row = [label]
            for v, _ in VIEWS:
                m = pair["views"][v]
                row.append("n/a" if m is None else f"{m['delta_ms'][k]:+.2f}")
            rows.append(row)
        out.append(("table", ["part (change, ms)", *(t for _, t in VIEWS)], rows))
    return out

