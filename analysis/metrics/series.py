"""Time series of one run in fixed bins (per second for runs of 10 s or more).

    records (measured)  ─► token chunk arrivals ─► output tokens/s per bin
                        ─► end_at of completed   ─► requests/s per bin
                        ─► in_flight step fn     ─► time-weighted mean requests in flight per bin
    power.jsonl rows    ─► energy_series (counter or trapezoid) ─► mean W per bin, per source/device

All series share the run's window (``figures.window``) as time zero. A bin with no power samples
on both sides is None (not 0). Power rows: {"t_ns", "source", "device", "scope", "kind":
"energy_j"|"power_w"|"mark", "value", "wrap_j"?} (see analysis/energy/window.py); a source named
"estimate" (or described with evidence "estimated") is labelled estimated.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract.power import PowerRow
from analysis.energy import series as es
from analysis.metrics import figures as m
from analysis.contract.records import Records


def bin_width_s(duration_s: float) -> float:
    """1 s bins for runs of 10 s or more; shorter runs get 20 bins (so a plot has a shape)."""
    return 1.0 if duration_s >= 10 else max(duration_s / 20, 1e-3)


def _edges(win: tuple[int, int], bin_s: float) -> np.ndarray:
    """Bin edges from the window start; the last bin is cut at the window end."""
    n = max(1, int(np.ceil((win[1] - win[0]) / (bin_s * 1e9) - 1e-9)))
    edges = win[0] + (np.arange(n + 1) * bin_s * 1e9).astype(np.int64)   # [n + 1]
    edges[-1] = win[1]
    return edges


def _rates(times: list[int], weights: list[float], edges: np.ndarray) -> list[float]:
    """Sum of weights per bin / bin width (per second)."""
    widths = np.diff(edges).astype(float) / 1e9
    if not len(times):
        return [0.0] * len(widths)
    h, _ = np.histogram(np.asarray(times, dtype=np.int64), bins=edges,
                        weights=np.asarray(weights, dtype=float))
    return [float(x) for x in h / widths]


BLOCK = 1 << 20      # chunks binned at a time


def _token_rates(tab, meas: np.ndarray, edges: np.ndarray) -> list[float]:
    """_rates of the token chunks of measured records (their n at their arrival), a block of
    chunks at a time: np.histogram's bins ([a, b), the last [a, b]) by searchsorted and
    bincount. The same sums: the weights are whole token counts."""
    nb = len(edges) - 1
    if not len(tab.t):
        return [0.0] * nb
    owner, sums = tab.record_of_chunk(), np.zeros(nb)
    for lo in range(0, len(tab.t), BLOCK):
        t, n = tab.t[lo:lo + BLOCK], tab.n[lo:lo + BLOCK]
        keep = (n > 0) & meas[owner[lo:lo + BLOCK]]
        keep &= (t >= edges[0]) & (t <= edges[-1])
        t, n = t[keep], n[keep]
        b = np.searchsorted(edges, t, side="right") - 1
        b[t == edges[-1]] = nb - 1
        sums += np.bincount(b, weights=n.astype(float), minlength=nb)[:nb]
    return [float(x) for x in sums / (np.diff(edges).astype(float) / 1e9)]


def _in_flight_mean(steps: tuple[np.ndarray, np.ndarray], edges: np.ndarray) -> list[float]:
    """Time-weighted mean of the step function (figures.in_flight_steps) in each bin."""
    t, n = steps
    if not t.size:
        return [0.0] * (len(edges) - 1)
    # the area under the step function up to each step (exact, in integers), then to each edge
    cum = np.zeros(t.size, np.int64)
    np.cumsum(np.diff(t) * n[:-1], out=cum[1:])
    i = np.searchsorted(t, edges, side="right")
    j = np.maximum(i - 1, 0)
    areas = np.where(i > 0, cum[j] + (edges - t[j]) * n[j], 0).astype(float)
    return [float(a) for a in np.diff(areas) / np.diff(edges).astype(float)]


def power_series(rows: list[dict | PowerRow], edges: np.ndarray,
                 estimated_names: frozenset = frozenset({"estimate"})) -> list[dict]:
    """Mean power per bin for each (source, device): {"label", "source", "device", "scope",
    "evidence", "watts": [W or None per bin]}."""
    by: dict = {}
    for r in map(PowerRow.read, rows):                  # power.jsonl rows, typed
        if r.kind in ("energy_j", "power_w") and r.value is not None:
            s = by.setdefault((r.source, r.device), {"energy": [], "power": [], "wrap": None,
                                                     "scope": r.scope})
            s["energy" if r.kind == "energy_j" else "power"].append(
                (int(r.t_ns), float(r.value)))
            s["wrap"] = r.wrap_j or s["wrap"]
    out = []
    for (src, dev), s in sorted(by.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        if len(s["energy"]) >= 2:
            t, v = zip(*sorted(s["energy"]))
            cum = es.unwrap_counter(t, v, s["wrap"])
        elif len(s["power"]) >= 2:
            t, w = zip(*sorted(s["power"]))
            cum = es.cumulative_trapezoid(t, w)
        else:
            continue
        watts: list[Optional[float]] = []
        for a, b in zip(edges[:-1], edges[1:]):
            e = es.window_energy(cum, int(a), int(b))
            watts.append(None if e is None else e / ((b - a) / 1e9))
        out.append({"label": f"{src}/{dev}" if dev else str(src), "source": src, "device": dev,
                    "scope": s["scope"], "watts": watts,
                    "evidence": "estimated" if src in estimated_names else "measured"})
    return out


def run_series(records: Records, power_rows: Optional[list[dict]] = None,
               bin_s: Optional[float] = None, estimated_names=frozenset({"estimate"})) -> dict:
    """{"status", "bin_s", "t_s" (bin starts, s since window start), "widths_s" (the last bin
    ends at the window end), "output_tokens_per_s",
    "requests_per_s", "in_flight", "power": [...]} or {"status": "unavailable", "reason"}."""
    win = m.window(records)
    if win is None:
        return {"status": "unavailable", "reason": "no measured window (no request was sent "
                                                    "and ended)"}
    tab, meas, done, _ = m.selections(records)      # arrays (analysis.contract.records)
    dur = (win[1] - win[0]) / 1e9
    bin_s = bin_s or bin_width_s(dur)
    edges = _edges(win, bin_s)
    end_ns, end_ok = tab.stamp("end_at_ns")
    done = end_ns[done & end_ok]
    return {"status": "measured", "bin_s": bin_s,
            "t_s": [float((e - win[0]) / 1e9) for e in edges[:-1]],
            "widths_s": [float(w) / 1e9 for w in np.diff(edges)],
            "output_tokens_per_s": _token_rates(tab, meas, edges),
            "requests_per_s": _rates(done, [1.0] * len(done), edges),
            "in_flight": _in_flight_mean(m.in_flight_steps(records, meas), edges),
            "power": power_series(power_rows or [], edges, frozenset(estimated_names))}
