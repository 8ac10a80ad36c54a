"""analysis.server.sanity: every rule of the gate on the values servers have been seen to say.
Each case yields a value or a reason, never an exception, never an absurd figure. The client
applies the header and usage rules from analysis/server/rules.py too (the one module of analysis
it may import); its wrappers are held to the same table here."""
import math

import pytest

from analysis.server import sanity
from loadgen.client import retry
from loadgen.client.request import _usage_checked
from loadgen.record import Record

BAD_NUMBERS = [float("nan"), float("inf"), float("-inf"), "abc", "5", True, None, [1]]


@pytest.mark.parametrize("v", BAD_NUMBERS + [-1, -0.5])
def test_a_gauge_is_a_finite_number_not_below_zero(v):
    c = sanity.gauge(v, "vllm:num_requests_running")
    assert c.value is None and "vllm:num_requests_running" in c.reason


@pytest.mark.parametrize("v", [0, 0.0, 3, 2.5])
def test_a_good_gauge_passes(v):
    assert sanity.gauge(v) == (v, None)


@pytest.mark.parametrize("text, ok", [("NaN", False), ("+Inf", False), ("abc", False),
                                      ("-1", False), ("2", True), ("0.0", True), ("1e1", True)])
def test_a_gauge_as_written_in_metrics_text(text, ok):
    c = sanity.gauge_text(text, "g")
    assert c.ok is ok and (c.value is None) is (not ok)
    assert not ok or c.value == float(text)


def test_a_counter_delta_is_the_end_minus_the_start():
    assert sanity.counter_delta([(5, 1.0), (9, 100.0), (15, 150.0), (21, 400.0), (30, 9e9)],
                                10, 21) == (300.0, None)
    assert sanity.counter_delta([(15, 20.0), (21, 40.0)], 10, 21).value == 40.0   # began inside


@pytest.mark.parametrize("pts", [
    [(9, 400.0), (15, 190.0), (21, 450.0)],      # hits 400 → 190 then up: the end is above
    [(9, 800.0), (15, 200.0), (21, 900.0)],      # queries 800 → 200 then up
    [(9, 10.0), (21, 5.0)],                      # the end below the start
])
def test_a_reset_anywhere_in_the_window_is_a_reset_not_a_delta(pts):
    c = sanity.counter_delta(pts, 10, 21, "vllm:prefix_cache_hits_total")
    assert c.value is None and "went down" in c.reason and "restarted or reset" in c.reason


def test_a_reset_before_the_window_or_after_it_does_not_matter():
    pts = [(1, 50.0), (5, 3.0), (9, 10.0), (21, 30.0), (25, 0.0)]
    assert sanity.counter_delta(pts, 10, 21).value == 20.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -3.0])
def test_a_counter_that_is_not_a_count_is_said_so_not_called_a_restart(bad):
    c = sanity.counter_delta([(9, 1.0), (15, bad), (21, 5.0)], 10, 21, "c")
    assert c.value is None and "went down" not in c.reason


@pytest.mark.parametrize("part, whole, why", [(1200, 1000, "> prefix-cache queries"),
                                              (5, 0, "no prefix-cache queries"),
                                              (float("nan"), 10, "NaN"),
                                              (-1, 10, "negative")])
def test_a_ratio_never_exceeds_one(part, whole, why):
    c = sanity.ratio(part, whole, "prefix-cache hits", "prefix-cache queries")
    assert c.value is None and why in c.reason


def test_a_good_ratio():
    assert sanity.ratio(250, 1000) == (0.25, None) and sanity.ratio(10, 10).value == 1.0


RETRY_AFTER = [  # (header value, seconds or None, ignored with a reason)
    ("120", 120.0, False), (" 7 ", 7.0, False), ("99999999999999", sanity.MAX_RETRY_AFTER_S, False),
    ("²", None, True), ("１２", None, True), ("٣", None, True), ("1.5", None, True),
    ("-1", None, True), ("soon", None, True), ("Wed, 21 Oct 2015 07:28:00", None, True),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0, False), (None, None, False), ("", None, False),
]


@pytest.mark.parametrize("value, secs, ignored", RETRY_AFTER)
def test_retry_after_per_rfc_9110(value, secs, ignored):
    c = sanity.retry_after(value, now=2e9)
    assert c.value == secs and (c.reason is not None) is ignored
    assert not ignored or "ignored" in c.reason


@pytest.mark.parametrize("value, secs, ignored", RETRY_AFTER)
def test_the_clients_retry_after_follows_the_gate(value, secs, ignored):
    assert retry.retry_after(value, now=2e9) == secs
    assert retry.retry_after_checked(value, now=2e9) == tuple(sanity.retry_after(value, now=2e9))


@pytest.mark.parametrize("v, why", [("5", "is a str ('5'), not an integer"),
                                    (5.0, "is a float"), (True, "is a bool"),
                                    (-5, "outside [0, 10]"), (11, "outside [0, 10]")])
def test_a_token_count_is_an_int_in_bounds(v, why):
    c = sanity.token_count(v, "cached_tokens", 10)
    assert c.value is None and why in c.reason


@pytest.mark.parametrize("v, why", [("5", "is a str ('5'), not an integer"), (-5, "outside [0, 10]")])
def test_the_clients_usage_check_says_the_same(v, why):
    rec = Record(id=0, phase="measured", status="ok")
    assert _usage_checked(rec, "prompt_tokens_details.cached_tokens", v, 10) is None
    assert rec.error_kind == "protocol" and why in rec.error
    assert sanity.token_count(v, "prompt_tokens_details.cached_tokens", 10).reason in rec.error


def test_good_token_counts():
    assert sanity.token_count(0, cap=10) == (0, None)
    assert sanity.token_count(None) == (None, None)


@pytest.mark.parametrize("q, p, t, why", [(0.2, 0.3, 0.4, "> server TTFT"),
                                          (float("nan"), 0.1, 1.0, "NaN"),
                                          (0.1, -0.1, 1.0, "negative"),
                                          (0.1, 0.1, float("inf"), "+Inf")])
def test_spans_that_disagree_are_refused(q, p, t, why):
    c = sanity.spans(q, p, t)
    assert c.value is None and why in c.reason


def test_spans_that_agree_pass_with_a_rounding_tolerance():
    assert sanity.spans(0.1, 0.2, 0.3).ok and sanity.spans(0.1, 0.2, 0.2995).ok


def test_the_gate_never_raises_on_junk():
    junk = [object(), {}, b"\xb2", math.nan, 10**400 if False else 1e308 * 10, "", " "]
    for v in junk:
        for f in (sanity.gauge, sanity.number, sanity.retry_after, sanity.token_count):
            f(v)
        sanity.ratio(v, v)
        sanity.spans(v, v, v)
        sanity.counter_delta([(1, v), (2, v)], 0, 3)
