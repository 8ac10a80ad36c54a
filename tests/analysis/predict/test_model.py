"""analysis.predict: the step model, the simulation and the fit, on pure inputs (fast)."""
import pytest

from analysis.predict import workload as wl
from analysis.predict.fit import fit_overheads
from analysis.predict.forecast import error
from analysis.predict.simulate import LoadPoint, simulate
from analysis.predict.step_model import Overheads, StepModel
from servers.jax.presets import get_preset, shape_dict

TINY = shape_dict(get_preset("tiny"), "fp32", 4096, 4)
A = {"peak_flops": 200e12, "bandwidth": 1e12}      # seed section 7: device A
B = {"peak_flops": 100e12, "bandwidth": 2e12}      # device B: half the compute, twice the BW
NO_ROOF = {"peak_flops": None, "bandwidth": None}  # floors 0: every millisecond is overhead


def test_decode_step_is_bandwidth_bound_and_half_compute_device_is_twice_as_fast():
    """A batch-1 decode step is a GEMV (I ≈ 1 FLOP/B here, far below both ridges): B, with half
    A's peak but twice its bandwidth, takes exactly half the time (seed section 7, work 1)."""
    a, b = StepModel(TINY, A), StepModel(TINY, B)
    assert a.floor_s(1, 64) == pytest.approx(2 * b.floor_s(1, 64), rel=1e-12)


def test_long_prefill_is_compute_bound_and_half_compute_device_is_twice_as_slow():
    """A 2048-token prefill has I far above both ridges (A 200, B 50 FLOP/B): B takes twice as
    long (seed section 7, work 2)."""
    a, b = StepModel(TINY, A), StepModel(TINY, B)
    assert b.floor_s(0, 0, 2048) == pytest.approx(2 * a.floor_s(0, 0, 2048), rel=1e-12)


def test_one_user_fixed_lengths_gives_the_step_times_exactly():
    m = StepModel(TINY, NO_ROOF, Overheads(step_ms=10, per_seq_ms=1, prefill_ms=30))
    r = simulate(m, [(16, 5)] * 4, LoadPoint("closed", concurrency=1))
    assert r["ttft_ms_p50"] == pytest.approx(40.0)            # step 10 + prefill 30, batch 0
    assert r["tpot_ms_p50"] == pytest.approx(11.0)            # step 10 + 1 sequence
    assert r["interactivity_tok_s_p50"] == pytest.approx(1000 / 11)
    assert r["output_throughput"] == pytest.approx(5 / (0.040 + 4 * 0.011))
    assert not r["truncated"]


def test_prompts_admitted_together_share_the_pass_but_each_pays_its_own_cost():
    m = StepModel(TINY, NO_ROOF, Overheads(step_ms=10, prefill_ms=30, prefill_req_ms=5))
    r = simulate(m, [(16, 3)] * 6, LoadPoint("closed", concurrency=3))
    assert r["ttft_ms_p50"] == pytest.approx(10 + 30 + 3 * 5)
    assert r["tpot_ms_p50"] == pytest.approx(10.0)


def test_a_closed_loop_user_sends_again_after_its_turnaround():
    m = StepModel(TINY, NO_ROOF, Overheads(step_ms=10, turnaround_ms=5))
    r = simulate(m, [(16, 3)] * 4, LoadPoint("closed", concurrency=1))
    assert r["ttft_ms_p50"] == pytest.approx(10.0) and r["tpot_ms_p50"] == pytest.approx(10.0)
    assert r["output_throughput"] == pytest.approx(12 / (4 * 0.030 + 3 * 0.005))


def test_more_users_than_slots_queue_and_ttft_grows():
    m = StepModel(TINY, NO_ROOF, Overheads(step_ms=10), slots=2)
    two = simulate(m, [(8, 8)] * 16, LoadPoint("closed", concurrency=2))
    four = simulate(m, [(8, 8)] * 16, LoadPoint("closed", concurrency=4))
    assert four["ttft_ms_p50"] > two["ttft_ms_p50"]
    assert four["output_throughput"] == pytest.approx(two["output_throughput"], rel=0.05)


def test_open_loop_is_seeded_and_bounded():
    m = StepModel(TINY, NO_ROOF, Overheads(step_ms=5), slots=4)
    pairs = wl.sample({"prompt_tokens": {"dist": "uniform", "min": 4, "max": 64},
                       "output_tokens": {"dist": "lognormal", "mean": 20, "std": 10}}, 200, 3)
    p = LoadPoint("poisson", rate=20.0)
    assert simulate(m, pairs, p, seed=1) == simulate(m, pairs, p, seed=1)
    cut = simulate(m, pairs, p, seed=1, max_steps=50)
    assert cut["truncated"] and cut["steps"] == 50


def test_prefill_chunk_spreads_a_long_prompt_over_steps():
    m = StepModel(TINY, NO_ROOF, Overheads(step_ms=1), slots=4, prefill_chunk=16)
    r = simulate(m, [(8, 200), (160, 2)], LoadPoint("closed", concurrency=2))
    assert r["requests"] == 2 and not r["truncated"]


@pytest.mark.parametrize("spec", [NO_ROOF, {"peak_flops": 2e11, "bandwidth": 5e9}])
def test_fit_recovers_known_overheads_from_synthetic_probes(spec):
    truth = Overheads(step_ms=4.0, per_seq_ms=0.75, prefill_ms=12.0, prefill_req_ms=3.0,
                      turnaround_ms=2.0)
    base = StepModel(TINY, spec, slots=8, prefill_chunk=16)
    pairs = wl.sample({"prompt_tokens": {"dist": "fixed", "value": 48},
                       "output_tokens": {"dist": "fixed", "value": 24}}, 40)
    probes = []
    for c in (1, 4, 8):
        pt = LoadPoint("closed", concurrency=c, warmup=min(c, 2))
        probes.append({"point": pt, "pairs": pairs,
                       "measured": simulate(base.with_overheads(truth), pairs, pt)})
    fit = fit_overheads(base, probes)
    for k, v in truth.as_dict().items():
        assert fit["overheads"][k] == pytest.approx(v, rel=1e-3), k
    assert fit["rms_rel_error"] < 1e-4 and len(fit["residuals"]) == 9


def test_error_says_which_figure_beat_the_bound_and_why_one_is_missing():
    point = {"ttft_ms_p50": 10.0, "tpot_ms_p50": 5.0, "output_throughput": 100.0,
             "interactivity_tok_s_p50": 200.0}
    summary = {"ttft_ms": {"p50": 20.0}, "tpot_ms": {"p50": 4.0}, "output_throughput": 50.0}
    e = error(point, summary)
    assert e["ttft_ms_p50"]["rel_error"] == pytest.approx(-0.5)
    assert e["ttft_ms_p50"]["beats_bound"] is False
    assert e["tpot_ms_p50"]["beats_bound"] is True
    assert e["output_throughput"]["beats_bound"] is False
    assert e["interactivity_tok_s_p50"]["rel_error"] is None
    assert "interactivity_tok_s" in e["interactivity_tok_s_p50"]["reason"]
