"""The report's "Server traces" section (summary.json ``server_timing`` ─► blocks).

    status n/a ─► one line saying why (no span joined, the switch off, ...)
    status ok  ─► how many records were joined, the bad / unmatched / dropped spans;
                  a table of each server phase (p50 / p90 / p99 ms);
                  the TTFT split (queue | prefill | server other | rest = client − server TTFT)
                  of the median request and of the slowest 1 % (mean)
Nothing when the run had no ``server_traces`` (docs/server-traces.md).
"""
from __future__ import annotations

from analysis.contract.summary import Summary
from analysis.contract.summary_server import ChunkStats, TtftParts, TtftSplit
from analysis.report.plots import COLORS, NO_MPL, encode, pyplot
from analysis.report.render import Block, fmt

PHASES = (("queue_ms", "queue"), ("prefill_ms", "prefill"), ("decode_ms", "decode"),
          ("server_ttft_ms", "server TTFT"), ("server_e2e_ms", "server E2E"),
          ("scheduler_ms", "in scheduler"))
PARTS = (("queue_ms", "queue"), ("prefill_ms", "prefill"), ("server_other_ms", "server other"),
         ("rest_ms", "rest (network, HTTP, client)"), ("client_ttft_ms", "client TTFT"))


def split_png(sp: TtftSplit):
    """Stacked bars of the TTFT split: the median request, the slowest 1 % (mean), then the ten
    slowest requests (a waterfall, slowest on top); (base64 PNG or None, caption)."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    sp = TtftSplit.read(sp)                     # summary.json's dict, or the block typed
    rows = [("median request", sp.p50), ("slowest 1 % (mean)", sp.slowest_1pct)]
    rows += [(f"request {r.id}", r) for r in sp.slowest]
    rows = [(label, r) for label, r in rows if r]
    if not rows:
        return None, "no joined request with a client TTFT to split"
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.2))
    y = list(range(len(rows)))[::-1]
    left = [0.0] * len(rows)
    for i, (k, label) in enumerate(PARTS[:4]):
        w = [max(0.0, getattr(r, k) or 0.0) for _, r in rows]
        ax.barh(y, w, left=left, color=COLORS[i], label=label)
        left = [a + b for a, b in zip(left, w)]
    ax.set_yticks(y, [label for label, _ in rows], fontsize=8)
    ax.set_xlabel("ms of the client's TTFT")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return encode(fig, plt), ("TTFT split per request (queue, prefill, the server's other time, "
                              "the rest: network, HTTP, client); negative parts drawn as 0")


def server_timing_blocks(s, with_plots: bool = False) -> list[Block]:
    """``s``: summary.json (a dict or a Summary)."""
    st = Summary.read(s).server_timing
    if st is None:
        return []
    out: list[Block] = [("h", "Server traces")]
    bad = st.bad_spans
    counts = (f"{st.joined} of {st.records_traced} traced requests joined to the "
              f"server's span; {st.unmatched_spans or 0} spans matched no record; "
              f"{sum(bad.values())} bad spans refused"
              + (f" ({'; '.join(f'{k}: {v}' for k, v in list(bad.items())[:3])})" if bad else ""))
    if st.status != "ok":
        return out + [("p", f"{st.status}. {counts}.")]
    out.append(("p", f"Where each request's time went, from the server's own spans (OTLP). "
                     f"{counts}."))
    none = ChunkStats()
    out.append(("table", ["phase", "p50 ms", "p90 ms", "p99 ms", "requests"],
                [[label, fmt(ph.p50), fmt(ph.p90), fmt(ph.p99), str(ph.count)]
                 for k, label in PHASES for ph in [st.phases.get(k) or none]]))
    sp = st.ttft_split
    med, slow = sp.p50, sp.slowest_1pct or TtftParts()
    if med:
        out.append(("p", "The client's TTFT split: queue + prefill + the server's other time + "
                         "the rest (client TTFT − server TTFT) = the client TTFT, per request."))
        out.append(("table", ["part", "median request ms",
                              f"slowest 1 % ({slow.requests or 0}) mean ms"],
                    [[label, fmt(getattr(med, k)), fmt(getattr(slow, k))] for k, label in PARTS]))
        if with_plots:
            img, note = split_png(sp)
            out.append(("img", img, note) if img else ("p", note))
    return out
