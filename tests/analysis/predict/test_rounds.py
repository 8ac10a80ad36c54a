"""analysis.predict.rounds on hand-made inputs: the round order, the measured max rate and the
rate points, and the rounds brought together (median, spread, verdict against the bar)."""
import pytest

from analysis.predict import rounds
from analysis.predict.simulate import LoadPoint


def test_the_order_alternates_between_rounds():
    v = [1, 2, 4, 8, 16]
    assert rounds.round_order(v, 1) == [1, 2, 4, 8, 16]
    assert rounds.round_order(v, 2) == [16, 8, 4, 2, 1]
    assert rounds.round_order(v, 3) == [1, 2, 4, 8, 16]
    assert rounds.round_order((0.2, 0.8), 4) == [0.8, 0.2] and v == [1, 2, 4, 8, 16]


def probe(c, rt):
    return {"point": LoadPoint("closed", concurrency=c), "request_throughput": rt}


def test_the_max_rate_is_the_highest_concurrency_probes_request_throughput():
    assert rounds.max_rate([probe(1, 0.5), probe(8, 1.4), probe(4, 1.5)]) == 1.4
    assert rounds.max_rate([probe(1, 0.5), probe(4, 1.2), probe(8, None)]) == 1.2
    assert rounds.max_rate([probe(1, None), probe(8, 0)]) is None and rounds.max_rate([]) is None


def test_rate_points_are_fractions_of_the_max_rate():
    assert rounds.rate_values(1.4, [0.2, 0.4, 0.6, 0.8]) == pytest.approx([0.28, 0.56, 0.84, 1.12])
    assert rounds.rate_values(1.23456, [0.5]) == [0.6173]            # 4 significant digits


def test_only_rates_up_to_80_percent_of_the_measured_max_are_judged():
    assert rounds.judged("concurrency", [16], [None]) == (True, "")
    assert rounds.judged("rate", [0.8], [1.0]) == (True, "")
    ok, why = rounds.judged("rate", [0.9], [1.0])
    assert not ok and "90%" in why and "80%" in why
    # absolute rates: the median over the rounds of rate / that round's max (0.75, 0.7, 0.95)
    assert rounds.judged("rate", [0.6, 0.7, 0.76], [0.8, 1.0, 0.8])[0]
    assert rounds.judged("rate", [0.9, 0.9], [1.0, 1.0])[0] is False
    assert rounds.judged("rate", [0.5], [None]) == (
        False, "no max rate measured (no probe's request throughput)")


def row(value, tpot, thr, ttft=None, point=None):
    err = {"tpot_ms_p50": {"rel_error": tpot}, "output_throughput": {"rel_error": thr},
           "ttft_ms_p50": {"rel_error": ttft}}
    return {"value": value, "error": err, **({"point": point} if point is not None else {})}


def test_aggregate_takes_the_median_and_spread_and_judges_the_median():
    r1 = [row(1, -0.19, 0.35), row(8, 0.13, -0.10)]
    r2 = [row(8, 0.02, -0.01), row(1, -0.05, 0.06)]          # reversed order, same points
    r3 = [row(1, -0.10, 0.12), row(8, None, -0.02)]          # one figure missing
    pts = rounds.aggregate([r1, r2, r3], "concurrency")
    assert [p["point"] for p in pts] == [1, 8]
    one, eight = pts
    assert one["errors"]["tpot_ms_p50"] == [-0.19, -0.05, -0.10]
    assert one["stats"]["tpot_ms_p50"] == {"median": -0.10, "min": -0.19, "max": -0.05,
                                           "rounds": 3}
    assert one["stats"]["output_throughput"]["median"] == pytest.approx(0.12)
    assert one["judged"] and one["pass"] is True               # medians 10 %, 12 %: within 15 %
    assert eight["stats"]["tpot_ms_p50"] == {"median": pytest.approx(0.075), "min": 0.02,
                                             "max": 0.13, "rounds": 2}
    assert eight["pass"] is True and rounds.passed(pts)
    # one round far off does not decide alone; two of three do
    worse = rounds.aggregate([r1, r2, [row(1, -0.30, 0.40), row(8, 0.0, 0.0)]], "concurrency")
    assert worse[0]["verdict"]["tpot_ms_p50"]["pass"] is False and worse[0]["pass"] is False
    assert worse[0]["verdict"]["output_throughput"]["median"] == pytest.approx(0.35)
    assert not rounds.passed(worse)


def test_a_figure_no_round_measured_fails_its_point():
    pts = rounds.aggregate([[row(2, None, 0.01)]], "concurrency")
    assert pts[0]["stats"]["tpot_ms_p50"]["median"] is None and pts[0]["pass"] is False


def test_rate_rounds_group_by_fraction_and_judge_up_to_80_percent():
    """Each round's rates differ (its own max rate); the point is the fraction."""
    r1 = [row(0.28, None, None, ttft=0.10, point=0.2), row(1.26, None, None, ttft=0.9, point=0.9)]
    r2 = [row(1.17, None, None, ttft=0.5, point=0.9), row(0.26, None, None, ttft=-0.30, point=0.2)]
    r3 = [row(0.30, None, None, ttft=0.20, point=0.2), row(1.35, None, None, ttft=0.7, point=0.9)]
    pts = rounds.aggregate([r1, r2, r3], "rate", [1.4, 1.3, 1.5])
    low, high = pts
    assert low["values"] == [0.28, 0.26, 0.30] and low["stats"]["ttft_ms_p50"]["median"] == 0.10
    assert low["judged"] and low["pass"] is True and set(low["verdict"]) == {"ttft_ms_p50"}
    assert not high["judged"] and high["pass"] is None and "above 80%" in high["not_judged"]
    assert rounds.passed(pts)                       # the one judged point passed
    assert not rounds.passed([high])                # nothing judged: no pass


def test_the_table_shows_each_round_the_median_the_spread_and_a_verdict_per_point():
    pts = rounds.aggregate([[row(1, -0.19, 0.35)], [row(1, -0.05, 0.06)]], "concurrency")
    text = rounds.rounds_table(pts, "concurrency", 2)
    assert "round 1 | round 2 | median | spread (min..max)" in text
    assert "concurrency=1 | TPOT p50 | -19.0 % | -5.0 % | -12.0 % | -19.0 % .. -5.0 %" in text
    assert ("verdict concurrency=1: NOT within the bar: TPOT p50 median -12.0 % (bar 15%), "
            "out tok/s median +20.5 % (bar 15%)") in text
    rate = rounds.aggregate([[row(0.28, None, None, ttft=0.1, point=0.2)]], "rate", [1.4])
    assert "verdict rate 0.2×max (0.28 req/s): within the bar: TTFT p50 median +10.0 %" in \
        rounds.rounds_table(rate, "rate", 1)
