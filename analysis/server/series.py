"""server_metrics.jsonl as series over time, and the scrapes that bound the measured window.

    run_dir/server_metrics.jsonl ─► read_rows ─► Series: per sample name and label set,
        (t_ns, value) in time order; the good scrapes' times; the "loadgen:mark" rows by name
    Series.at(name, t)    the sum over label sets of each one's last value at or before t (the
                          scraper writes counters only when they change)
    Series.delta / bucket_deltas / gauge   counters, histogram buckets, gauges between two times;
                          counters and gauges through sanity.py (delta_checked, gauge_checked:
                          a value or the reason it was refused)
    window_edges(series, (t0, end)) ─► the last good scrape at or before t0 and the first at or
        after the end (the scraper takes one at each mark), with notes where they fall short
"""
from __future__ import annotations

import bisect
from collections import defaultdict
from pathlib import Path
from typing import Optional

from analysis.contract.rundir import read_rows as contract_rows
from analysis.server import sanity

FILE = "server_metrics.jsonl"
SCRAPE, MARK = "loadgen:scrape", "loadgen:mark"


def read_jsonl(path: str | Path) -> list[dict]:
    """A JSON-lines file's object rows (analysis.contract.rundir.read_rows)."""
    return contract_rows(path)


def read_rows(path: str | Path) -> list[dict]:
    """server_metrics.jsonl ─► rows; a torn last line is skipped; no file ─► []."""
    return [r for r in read_jsonl(path) if "t_ns" in r and "name" in r]


def _num(v) -> float:
    """A row's value as a float; unreadable (null, text) ─► NaN, which the gate then refuses."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


class Series:
    """Rows indexed by sample name; values summed over label sets (engines, model names)."""

    def __init__(self, rows: list[dict]):
        self.by_name: dict[str, dict[tuple, list[tuple[int, float]]]] = defaultdict(dict)
        self.scrapes: list[int] = []
        self.marks: dict[str, int] = {}
        for r in sorted(rows, key=lambda r: r["t_ns"]):
            name, labels = r["name"], r.get("labels") or {}
            if name == SCRAPE:
                if labels.get("status") == "ok":
                    self.scrapes.append(int(r["t_ns"]))
            elif name == MARK:
                self.marks.setdefault(labels.get("mark"), int(r["t_ns"]))
            else:                                   # histogram buckets keep their "le"
                key = tuple(sorted(labels.items()))
                self.by_name[name].setdefault(key, []).append((int(r["t_ns"]), _num(r.get("value"))))

    def pick(self, names: tuple[str, ...], suffix: str = "") -> tuple[str, bool]:
        """(the first of ``names`` whose ``name + suffix`` has rows, True) or (names[0], False)."""
        for n in names:
            if n + suffix in self.by_name:
                return n, True
        return names[0], False

    def at(self, name: str, t_ns: int) -> Optional[float]:
        """Sum over label sets of each one's last value at or before t_ns (None: no such row)."""
        total, seen = 0.0, False
        for pts in self.by_name.get(name, {}).values():
            i = bisect.bisect_right(pts, (t_ns, float("inf"))) - 1
            if i >= 0:
                total += pts[i][1]
                seen = True
        return total if seen else None

    def delta(self, name: str, a: int, b: int) -> Optional[float]:
        """The counter's Δ between a and b, or None (not exposed, or the gate refused it)."""
        return self.delta_checked(name, a, b).value

    def delta_checked(self, name: str, a: int, b: int) -> sanity.Checked:
        """Σ over label sets of sanity.counter_delta: every sample up to b checked (finite, ≥ 0,
        never lower than the one before: a reset mid-window is a reset even when the end is
        above the start). No sample at or before b: Checked(None, "not exposed")."""
        total, seen = 0.0, False
        for pts in self.by_name.get(name, {}).values():
            if not pts or pts[0][0] > b:
                continue
            c = sanity.counter_delta(pts, a, b, name)
            if not c.ok:
                return c
            total += c.value
            seen = True
        return sanity.Checked(total) if seen else sanity.Checked(None, f"{name} not exposed")

    def bucket_deltas(self, base: str, a: int, b: int) -> list[tuple[float, float]]:
        """[(upper bound s, Δ cumulative count)] of ``base``_bucket, summed over label sets."""
        return self.bucket_deltas_checked(base, a, b)[0]

    def bucket_deltas_checked(self, base: str, a: int,
                              b: int) -> tuple[list[tuple[float, float]], Optional[str]]:
        """bucket_deltas, each bucket's series through sanity.counter_delta: ([], the reason)
        when any bucket went down in the window or is not a count."""
        by_le: dict[float, float] = defaultdict(float)
        for key, pts in self.by_name.get(base + "_bucket", {}).items():
            le = _num(dict(key).get("le"))
            if le != le or not pts or pts[0][0] > b:
                continue                      # no "le", or no sample at or before b
            c = sanity.counter_delta(pts, a, b, f"{base}_bucket{{le={dict(key).get('le')}}}")
            if not c.ok:
                return [], c.reason
            by_le[le] += c.value
        return sorted(by_le.items()), None

    def gauge(self, name: str, a: int, b: int) -> list[float]:
        """The gauge (summed over label sets) at each good scrape in [a, b]."""
        return [v for t in self.scrapes if a <= t <= b for v in [self.at(name, t)] if v is not None]

    def gauge_checked(self, name: str, a: int, b: int) -> tuple[list[float], Optional[str]]:
        """(the gauge's values in [a, b], None) or ([], the reason) when any of them fails the
        gate (NaN, ±Inf, negative): one absurd sample makes the max and the mean unknown."""
        vals = self.gauge(name, a, b)
        bad = [c.reason for c in (sanity.gauge(v, name) for v in vals) if not c.ok]
        if bad:
            return [], f"{len(bad)} of {len(vals)} samples refused: {bad[0]}"
        return vals, None


def window_edges(s: Series, window: tuple[int, int]) -> tuple[Optional[int], Optional[int], list]:
    """(start edge, end edge, notes): the last good scrape ≤ t0 and the first ≥ end."""
    t0, t1 = window
    notes = []
    if not s.scrapes:
        return None, None, ["no successful scrape"]
    i = bisect.bisect_right(s.scrapes, t0) - 1
    if i < 0:
        start = s.scrapes[0]
        notes.append("first scrape came after t0: requests before it are not in the deltas")
    else:
        start = s.scrapes[i]
    j = bisect.bisect_left(s.scrapes, t1)
    if j >= len(s.scrapes):
        end = s.scrapes[-1]
        notes.append("last scrape came before the window end: late requests may be missing")
    else:
        end = s.scrapes[j]
    if end <= start:
        return None, None, notes + ["no scrape interval covers the window"]
    return start, end, notes
