"""Per-user speed, throughput per accelerator and J/token (analysis/metrics/capacity.py), by hand
and through a run directory's summary.json."""
import json

import pytest

from analysis.metrics import capacity
from analysis.metrics.summary import write_summary
from tests.analysis.synth import closed_loop, jax_sut, power_rows, server_meta, write_run


def test_interactivity_p10_is_the_slow_tail_of_the_speeds():
    # TPOT 10, 20, 40, 50, 100 ms -> speeds 100, 50, 25, 20, 10 tok/s
    it = capacity.interactivity([10, 20, 40, 50, 100, float("nan"), None, 0])
    assert it["p50"] == pytest.approx(25.0) and it["count"] == 5
    # numpy linear 10th percentile of [10, 20, 25, 50, 100] = 10 + 0.4 * (20 - 10) = 14:
    # the slow users, not 1000 / TPOT p10 (= 1000 / 14 ≈ 71, the fast ones)
    assert it["p10"] == pytest.approx(14.0) and it["reason"] is None
    none = capacity.interactivity([float("nan")])
    assert none["p50"] is None and none["p10"] is None and "TPOT undefined" in none["reason"]


def test_per_accelerator_and_joules_reasons():
    assert capacity.accelerators_of({"accelerators": 4}) == (4, None)
    n, why = capacity.accelerators_of({"target_url": "x"})
    assert n is None and "written before the key" in why
    assert capacity.per_accelerator(400.0, 4, None, "output_throughput") == (100.0, None)
    assert capacity.per_accelerator(None, 4, None, "output_throughput") == (
        None, "output_throughput is unavailable")
    assert capacity.joules_per_output_token({"status": "measured", "j_per_output_token": 0.5}) \
        == (0.5, None)
    j, why = capacity.joules_per_output_token({"status": "unmeasured",
                                               "reason": "no power source configured"})
    assert j is None and why == "power not measured: no power source configured"
    j, why = capacity.joules_per_output_token({"status": "estimated", "j_per_output_token": 0.2,
                                               "reason": "no measured source"})
    assert j is None and why.startswith("energy estimated")


def _run(tmp_path, sut, watts=None):
    # 2 lanes x 4 requests, 8 tokens, itl 10 ms: TPOT 10 ms for every request -> 100 tok/s
    recs = closed_loop(2, 4, itl_ms=10)
    meta = server_meta(mode="concurrency", rate=None, scheduled_rate=None, min_queries=0,
                       min_duration_s=0, power_sources=[{"name": "nvml", "status": "ok",
                                                         "evidence": "measured"}] if watts
                       else ["none"])
    d = write_run(tmp_path / "r", recs, meta, sut)
    if watts:
        end = max(r["end_at_ns"] for r in recs) / 1e6
        (d / "power.jsonl").write_text("".join(json.dumps(r) + "\n"
                                               for r in power_rows(0, end, watts)))
    write_summary(d)
    return json.loads((d / "summary.json").read_text())


def test_summary_json_carries_the_capacity_keys(tmp_path):
    s = _run(tmp_path, {**jax_sut(), "accelerators": 2}, watts=100)
    assert s["interactivity_tok_s"]["p50"] == pytest.approx(100.0, rel=1e-6)
    assert s["interactivity_tok_s"]["p10"] == pytest.approx(100.0, rel=1e-6)
    assert s["output_throughput_per_accelerator"] == pytest.approx(s["output_throughput"] / 2)
    assert s["joules_per_output_token"] == pytest.approx(s["energy"]["j_per_output_token"])
    assert s["joules_per_output_token"] is not None
    assert s["capacity"]["accelerators"] == 2 and s["capacity"]["reasons"] == {}


def test_missing_inputs_are_null_with_a_reason(tmp_path):
    s = _run(tmp_path, jax_sut())           # sut.json from before target.accelerators
    assert s["output_throughput_per_accelerator"] is None
    assert s["joules_per_output_token"] is None
    why = s["capacity"]["reasons"]
    assert "written before the key" in why["output_throughput_per_accelerator"]
    assert why["joules_per_output_token"] == "power not measured: no power source configured"
    assert s["interactivity_tok_s"]["p50"] is not None
