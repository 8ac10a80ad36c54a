"""The forecast drawn beside a measured frontier (frontier.png of ``loadgen sweep --predict``).

    frontier.json "forecast" (analysis.predict.overlay) ─► extent(fr) (the axes must hold it)
                                                       ─► draw(ax, fr, color): dashed line
        through the forecast's frontier, hollow diamonds at each point's forecast, a thin line
        from each forecast to its measured point labelled with the throughput error (%)
The legend names the grade: "forecast (spec-only bound)" or "forecast (calibrated)".
"""
from __future__ import annotations


def _pts(fr: dict) -> list[dict]:
    return [p for p in ((fr.get("forecast") or {}).get("points") or [])
            if p.get("x") is not None and p.get("y") is not None]


def extent(fr: dict) -> tuple[list[float], list[float]]:
    pts = _pts(fr)
    return [p["x"] for p in pts], [p["y"] for p in pts]


def draw(ax, fr: dict, color: str) -> bool:
    """Draw the forecast on ``ax``; False when the frontier carries none."""
    pts = _pts(fr)
    if not pts:
        return False
    grade = (fr.get("forecast") or {}).get("grade") or "forecast"
    label = "forecast (spec-only bound)" if grade == "spec-only" else f"forecast ({grade})"
    line = (fr.get("forecast") or {}).get("line") or []
    if line:
        ax.plot([a for a, _ in line], [b for _, b in line], "--", color=color, lw=1.2,
                alpha=0.8, label=label)
    for p in pts:
        ax.plot(p["x"], p["y"], "D", ms=5, markerfacecolor="white", markeredgecolor=color,
                label=None if line else label)
        label = None if not line else label
        if p.get("x_measured") is not None and p.get("y_measured") is not None:
            ax.plot([p["x"], p["x_measured"]], [p["y"], p["y_measured"]], ":", color=color,
                    lw=0.8, alpha=0.6)
            e = (p.get("error") or {}).get("y")
            if e is not None:
                ax.annotate(f"{e * 100:+.0f}%", (p["x"], p["y"]), fontsize=7, color=color,
                            textcoords="offset points", xytext=(4, -10))
    return True
