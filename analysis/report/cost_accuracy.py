"""Cost and accuracy beside speed: the run report's rows and the console's lines.

    summary["accuracy"] (analysis.metrics.accuracy) ─► accuracy_blocks / accuracy_line
    summary["cost"]     (analysis.metrics.cost)     ─► cost_blocks / cost_line
Each figure with how it was computed; a null one says why. Nothing when the run had neither a
workload.dataset nor a cost block (the accuracy condition row then says no check ran).
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.summary import Accuracy, CostBlock, CostInputs, Summary
from analysis.report.render import Block, fmt, num

COST_ROWS = (("usd_per_million_output_tokens", "$ / million output tokens (all-in)"),
             ("usd_per_million_input_tokens", "$ / million input tokens"),
             ("usd_per_million_total_tokens", "$ / million tokens (input + output alike)"),
             ("usd_per_million_tokens_at_slo", "$ / million output tokens at the SLO (goodput)"),
             ("energy_usd_per_million_output_tokens", "energy $ / million output tokens"))


def _money(x: Optional[float], c: Optional[CostBlock] = None, key: str = "") -> str:
    """Dollars with 4 significant digits ($0.001234, $12.35, $1.000e-320), never a misleading
    $0: a figure that came out exactly 0 from a price above 0 (it underflowed the float range,
    e.g. usd_per_hour 1e-320) is written "> $0 (...)"."""
    if x is None:
        return "n/a"
    inputs = (c.inputs if c else None) or CostInputs()
    price = inputs.usd_per_kwh if key.startswith("energy") else inputs.usd_per_hour
    if x == 0 and isinstance(price, (int, float)) and price > 0:
        return f"> $0 (below the float range: price {num(price)})"
    return f"${num(x)}"


def accuracy_text(a: dict | Accuracy) -> str:
    """One phrase: "0.97 (95 % CI 0.93–0.99), 97 of 100 checkable" or why there is none."""
    a = Accuracy.read(a)
    if a.fraction is None:
        return f"check ran; no fraction: {a.reason or 'no checkable answer'}"
    lo, hi = a.ci95 or (None, None)
    return (f"{a.fraction:.3f} (95 % CI {fmt(lo, 3)}–{fmt(hi, 3)}), {a.correct} of "
            f"{a.n} checkable answers right")


def accuracy_blocks(s: dict | Summary) -> list[Block]:
    a = Summary.read(s).accuracy
    if not a:
        return []
    rows = [["accuracy", accuracy_text(a), "measured (checked after each stream)"],
            ["checkable / requests", f"{a.n} / {a.requests}", "measured"],
            ["not checkable", ", ".join(f"{k.replace('_', ' ')} {v}"
                                        for k, v in a.unchecked.items() if v)
             or "none", "measured"],
            ["dataset", str(a.dataset or "n/a"), "recorded"]]
    return [("h", "Accuracy beside speed"),
            ("table", ["figure", "value", "evidence"], rows),
            ("p", f"Rule: {a.rule or 'n/a'}. Interval: {a.ci_rule or 'n/a'}. "
                  "The check runs once per request after its stream ended (off the stamping "
                  "path); the timing figures above are the same with or without it.")]


def _figure(c: CostBlock, key: str) -> Optional[float]:
    """One of COST_ROWS' named figures (a key not named in CostBlock: AttributeError)."""
    return getattr(c, key)


def cost_blocks(s: dict | Summary) -> list[Block]:
    c = Summary.read(s).cost
    if not c:
        return []
    rows = [[label, _money(_figure(c, key), c, key), c.how.get(key, "")]   # how: by figure name
            for key, label in COST_ROWS]
    rows.append(["cost of the measured window", _money(c.window_usd, c, "window_usd"),
                 "window × usd_per_hour × accelerators"])
    return [("h", "Cost"), ("table", ["figure", "value", "how"], rows)]


def accuracy_line(s: dict | Summary) -> Optional[str]:
    a = Summary.read(s).accuracy
    return None if not a else f"accuracy: {accuracy_text(a)}"


def cost_line(s: dict | Summary) -> Optional[str]:
    c = Summary.read(s).cost
    if not c:
        return None
    def per_m(key: str, what: str) -> str:
        v = _figure(c, key)
        if v is None:
            return "n/a"
        head, _, why = _money(v, c, key).partition(" (")      # "> $0 (why)": why after /M
        return f"{head}/M {what}" + (f" ({why}" if why else "")
    return (f"cost: {per_m('usd_per_million_output_tokens', 'output tok')} (all-in)   at SLO "
            f"{per_m('usd_per_million_tokens_at_slo', 'output tok')}   energy "
            f"{per_m('energy_usd_per_million_output_tokens', 'output tok')}")
