"""summary.json ``cost`` (analysis.metrics.cost) and ``accuracy`` (analysis.metrics.accuracy):
figures worked out on paper from hand-built records, null with a reason where an input is
missing, and the performance figures the same with and without the accuracy check."""
import json

import pytest

from analysis.metrics import summary
from analysis.metrics.accuracy import accuracy_block, wilson
from analysis.metrics.cost import cost_block
from tests.analysis.synth import MS, server_meta, steady

PRICE = {"usd_per_hour": 3.6, "usd_per_kwh": 0.36, "accelerators": 2}
POWER = [{"kind": "power_w", "source": "nvml", "device": 0, "scope": "gpu",
          "t_ns": k * 100 * MS, "value": 100.0} for k in range(21)]
SOURCES = [{"name": "nvml", "status": "ok", "evidence": "measured"}]


def test_cost_figures_from_the_window_tokens_goodput_and_joules():
    # 20 requests, 8 output + 10 prompt tokens each, window 1.05 s; 100 W: 105 J in the window
    s = summary.summarize(steady(20), server_meta(cost=PRICE, power_sources=SOURCES), POWER)
    c = s["cost"]
    usd = 1.05 / 3600 * 3.6 * 2                      # window × $/h per accelerator × 2
    assert c["window_usd"] == pytest.approx(usd)
    assert c["usd_per_million_output_tokens"] == pytest.approx(usd / 160 * 1e6)
    assert c["usd_per_million_total_tokens"] == pytest.approx(usd / 360 * 1e6)
    assert c["usd_per_million_tokens_at_slo"] == pytest.approx(usd / 160 * 1e6)  # all meet it
    assert c["energy_usd_per_million_output_tokens"] == pytest.approx(105 / 160 * 1e6 / 3.6e6 * 0.36)
    assert c["usd_per_million_input_tokens"] is None               # the documented non-split
    assert "not split" in c["how"]["usd_per_million_input_tokens"]
    assert "all-in" in c["how"]["usd_per_million_output_tokens"]
    assert "2 accelerator(s)" in c["how"]["usd_per_million_output_tokens"]
    json.dumps(c, allow_nan=False)


def test_at_slo_counts_only_the_tokens_of_requests_meeting_it():
    recs = steady(20)
    slow = steady(1, ttft_ms=5000, start_ms=950)[0]     # TTFT 5 s: fails the preset's 2 s
    slow["id"] = 20
    s = summary.summarize(recs + [slow], server_meta(cost=PRICE))
    c = s["cost"]
    usd = c["window_usd"]
    assert c["usd_per_million_output_tokens"] == pytest.approx(usd / 168 * 1e6)
    assert c["usd_per_million_tokens_at_slo"] == pytest.approx(usd / 160 * 1e6)
    assert c["inputs"]["goodput_output_tokens"] == 160


def test_missing_inputs_are_null_with_the_reason_never_a_default_price():
    assert summary.summarize(steady(5), server_meta())["cost"] is None     # no cost block
    c = summary.summarize(steady(5), server_meta(cost={"usd_per_kwh": 0.2, "accelerators": 1,
                                                       "usd_per_hour": None}))["cost"]
    for k in ("usd_per_million_output_tokens", "usd_per_million_tokens_at_slo",
              "usd_per_million_total_tokens", "window_usd"):
        assert c[k] is None
    assert c["how"]["usd_per_million_output_tokens"] == "null: no usd_per_hour in the scenario's cost block"
    assert c["energy_usd_per_million_output_tokens"] is None
    assert c["how"]["energy_usd_per_million_output_tokens"].startswith("null: energy unmeasured")
    no_slo = server_meta(cost=PRICE, slo={"percentile": 99.0})
    c = summary.summarize(steady(5), no_slo)["cost"]
    assert c["usd_per_million_tokens_at_slo"] is None
    assert "no per-request limit" in c["how"]["usd_per_million_tokens_at_slo"]
    c = cost_block(PRICE, None, [], None, None, None)              # no window
    assert c["usd_per_million_output_tokens"] is None
    assert "no measurement window" in c["how"]["usd_per_million_output_tokens"]


def test_wilson_interval():
    lo, hi = wilson(8, 8)
    assert lo == pytest.approx(8 / (8 + 1.959963984540054 ** 2)) and hi == 1.0
    lo, hi = wilson(0, 8)
    assert lo == 0.0 and hi == pytest.approx(1 - 8 / (8 + 1.959963984540054 ** 2))
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    assert wilson(0, 0) is None


def _graded(values) -> list:
    recs = steady(len(values))
    for r, v in zip(recs, values):
        if v == "cut":
            r["correct"], r["finish_reason"] = None, "length"
        elif v == "failed":
            r["correct"], r["status"], r["error_kind"] = None, "error", "http"
        else:
            r["correct"], r["finish_reason"] = v, "stop"
    return recs


def test_accuracy_counts_checkable_answers_and_says_why_others_are_not():
    meta = server_meta(accuracy={"dataset": "builtin arithmetic", "rule": "r"})
    a = accuracy_block(_graded([True, True, False, "cut", "failed"]), meta)
    assert (a["n"], a["correct"], a["fraction"]) == (3, 2, pytest.approx(2 / 3))
    assert a["ci95"] == pytest.approx(list(wilson(2, 3)))
    assert a["unchecked"] == {"failed_or_cancelled": 1, "cut_by_max_tokens": 1, "other": 0}
    a = accuracy_block(_graded(["cut", "cut"]), meta)        # the check ran, nothing checkable
    assert a["ran"] and a["n"] == 0 and a["fraction"] is None and a["ci95"] is None
    assert a["reason"] == "no answer was checkable: 2 cut by max tokens"
    assert accuracy_block(steady(3), server_meta()) is None          # no check ran


def test_performance_figures_are_the_same_with_and_without_the_check():
    recs = _graded([True, False, True, True])
    plain = [{k: v for k, v in r.items() if k != "correct"} for r in recs]
    with_check = summary.summarize(recs, server_meta(accuracy={"dataset": "d"}))
    without = summary.summarize(plain, server_meta())
    assert with_check.pop("accuracy")["fraction"] == 0.75 and without.pop("accuracy") is None
    assert json.dumps(with_check, sort_keys=True) == json.dumps(without, sort_keys=True)
