"""The frontier by hand: non-dominated points, ties, a point without x, interpolation, who is
ahead (analysis/metrics/frontier.py)."""
import pytest

from analysis.metrics import frontier as f


def row(v, x, y, valid=True, **extra):
    return {"value": v, "run_dir": f"concurrency-{v}", "valid": valid,
            "interactivity_tok_s": {"p50": x, "p10": None},
            "output_throughput_per_accelerator": y, **extra}


def test_non_dominated_points_are_marked():
    # (100, 50) and (80, 90) trade off; (70, 60) is dominated by (80, 90); (40, 120) is best y
    pts = [row(1, 100, 50), row(2, 80, 90), row(3, 70, 60), row(4, 40, 120)]
    fr = f.frontier(pts, "load.concurrency")
    assert [p["on_frontier"] for p in fr["points"]] == [True, True, False, True]
    assert fr["line"] == [[40, 120], [80, 90], [100, 50]]
    assert fr["x"] == "interactivity_tok_s.p50" and fr["y"] == "output_throughput_per_accelerator"
    assert fr["points"][0] == {"run": "concurrency-1", "param": "load.concurrency", "value": 1,
                               "x": 100, "y": 50, "on_frontier": True, "valid": True}


def test_ties_and_partial_ties():
    # two equal points: neither dominates the other, both on it; a point equal in x and lower
    # in y is dominated (strictly worse on one axis, equal on the other)
    assert f.on_frontier([(10, 10), (10, 10)]) == [True, True]
    assert f.on_frontier([(10, 10), (10, 9)]) == [True, False]
    assert f.on_frontier([(10, 10), (9, 10)]) == [True, False]
    assert f.on_frontier([(5, 5)]) == [True]
    assert f.on_frontier([]) == []


def test_a_point_without_x_is_excluded_with_its_reason():
    pts = [row(1, None, 500, capacity_reasons={"interactivity_tok_s": "no request with > 1 "
                                               "output token"}),
           row(2, 80, None), row(4, 40, 120)]
    fr = f.frontier(pts, "load.concurrency")
    # the point without x would dominate everything on y: it must not knock the others off
    assert [p["on_frontier"] for p in fr["points"]] == [False, False, True]
    assert fr["excluded"] == [
        {"run": "concurrency-1", "missing": "interactivity_tok_s.p50",
         "reason": "no request with > 1 output token"},
        {"run": "concurrency-2", "missing": "output_throughput_per_accelerator",
         "reason": "output_throughput_per_accelerator is null in the point's summary"}]


def test_cost_frontier_prefers_lower_dollars():
    pts = [row(1, 100, 1, cost={"usd_per_million_output_tokens": 9.0}),
           row(2, 80, 1, cost={"usd_per_million_output_tokens": 3.0}),
           row(4, 60, 1, cost={"usd_per_million_output_tokens": 4.0})]
    fr = f.frontier(pts, "load.concurrency", y=f.Y_COST)
    assert fr["y_better"] == "lower"
    assert [p["on_frontier"] for p in fr["points"]] == [True, True, False]


def test_interpolation_on_the_frontier_and_its_refusals():
    line = [[40, 120], [80, 90], [100, 50]]
    assert f.at_interactivity(line, 60) == (105.0, None)
    assert f.at_interactivity(line, 90) == (70.0, None)
    assert f.at_interactivity(line, 100) == (50.0, None)
    assert f.at_interactivity(line, 40) == (120.0, None)
    y, why = f.at_interactivity(line, 101)
    assert y is None and why == ("does not reach 101 tok/s per user: its fastest frontier "
                                 "point gives 100")
    y, why = f.at_interactivity(line, 39)
    assert y is None and why.startswith("starts above 39 tok/s per user (slowest frontier "
                                        "point 40)")
    assert f.at_interactivity([], 5)[0] is None
    assert f.at_interactivity([[7, 3]], 7) == (3.0, None)


def test_who_is_ahead_and_by_how_much():
    a = f.frontier([row(1, 100, 50), row(4, 40, 120)], "load.concurrency")
    b = f.frontier([row(1, 120, 40), row(8, 30, 200)], "load.concurrency")
    at = f.ahead([("A", a), ("B", b)], 70)
    # A at 70: 120 + (50 - 120) * 30/60 = 85; B: 200 + (40 - 200) * 40/90 ≈ 128.9
    yb = 200 + (40 - 200) * (70 - 30) / 90
    assert at["values"][0]["y"] == pytest.approx(85.0)
    assert at["values"][1]["y"] == pytest.approx(yb)
    assert at["ahead"] == "B" and at["runner_up"] == "A"
    assert at["by"] == pytest.approx(yb - 85) and at["by_pct"] == pytest.approx((yb - 85) / 85 * 100)
    far = f.ahead([("A", a), ("B", b)], 110)
    assert far["ahead"] is None and far["refused"].startswith("fewer than two frontiers reach it")
    assert "A does not reach 110" in far["refused"]
    tie = f.ahead([("A", a), ("A2", a)], 70)
    assert tie["ahead"] is None and tie["by"] == 0 and tie["refused"] is None
