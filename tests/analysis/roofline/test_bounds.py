"""Roofline arithmetic against the seed's worked examples (section 7) and hand-computed bounds."""
import math

import pytest

from analysis.roofline import model_cost
from analysis.roofline import bounds
from analysis.roofline.devices import DeviceSpec, Figure

A = {"peak_flops": 200e12, "bandwidth": 1e12}
B = {"peak_flops": 100e12, "bandwidth": 2e12}


def test_seed_work1_low_intensity_b_wins():
    a, b = bounds.bound(1e12, 100e9, A), bounds.bound(1e12, 100e9, B)
    assert a.time_s == pytest.approx(0.100) and a.binding == "memory"
    assert b.time_s == pytest.approx(0.050) and b.binding == "memory"
    assert a.compute_s == pytest.approx(0.005) and b.compute_s == pytest.approx(0.010)
    assert a.intensity == pytest.approx(10)
    assert a.roof_flops == pytest.approx(10e12) and b.roof_flops == pytest.approx(20e12)


def test_seed_work2_high_intensity_a_wins():
    a, b = bounds.bound(1e14, 100e9, A), bounds.bound(1e14, 100e9, B)
    assert a.time_s == pytest.approx(0.500) and a.binding == "compute"
    assert b.time_s == pytest.approx(1.000) and b.binding == "compute"
    assert a.roof_flops == pytest.approx(200e12) and b.roof_flops == pytest.approx(100e12)


def test_ridges_and_crossing():
    assert bounds.ridge_point(200e12, 1e12) == pytest.approx(200)
    assert bounds.ridge_point(100e12, 2e12) == pytest.approx(50)
    assert bounds.crossing_intensity(A, B) == pytest.approx(100)
    assert bounds.crossing_intensity(B, A) == pytest.approx(100)
    # at I = 100 the two roofs are equal
    f, q = 100 * 1e11, 1e11
    assert bounds.bound(f, q, A).time_s == pytest.approx(bounds.bound(f, q, B).time_s)
    # a device better at both never crosses
    assert bounds.crossing_intensity({"peak_flops": 300e12, "bandwidth": 3e12}, B) is None


def test_units_gib():
    assert bounds.gib_per_s(800) == 858_993_459_200
    assert (bounds.gib_per_s(800) / (800 * bounds.GB) - 1) == pytest.approx(0.0737, abs=1e-4)


def test_missing_roof_is_incomplete_not_guessed():
    only_bw = bounds.bound(1e12, 1e9, {"peak_flops": None, "bandwidth": 1e12})
    assert only_bw.time_s == pytest.approx(1e-3) and only_bw.binding == "memory"
    assert not only_bw.complete and only_bw.ridge is None and only_bw.roof_flops is None
    none = bounds.bound(1e12, 1e9, None)
    assert none.time_s is None and none.binding is None


def test_devicespec_and_dtype_lookup():
    spec = DeviceSpec("x", "1 chip", peak={"bf16": Figure(100e12, "FLOP/s", "documented", "t"),
                                           "fp32": Figure(10e12, "FLOP/s", "documented", "t")},
                      mem_bandwidth=Figure(1e12, "B/s", "documented", "t"))
    assert bounds.bound(1e12, 1e6, spec, "fp32").time_s == pytest.approx(0.1)
    assert bounds.bound(1e12, 1e6, spec, "bf16").time_s == pytest.approx(0.01)
    assert bounds.bound(1e12, 1e6, {"peak_flops": {"bf16": 1e12}, "bandwidth": 1e12},
                          "bf16").time_s == pytest.approx(1.0)


def test_mbu_mfu_fraction():
    assert bounds.mbu(0.5e12, 2e12) == pytest.approx(0.25)
    assert bounds.mfu(50e12, 200e12) == pytest.approx(0.25)
    assert bounds.mbu(None, 1e12) is None and bounds.mfu(1.0, None) is None
    assert bounds.fraction_of_bound(1e-3, 4e-3) == pytest.approx(0.25)
    assert bounds.fraction_of_bound(None, 1.0) is None


SHAPE = {"name": "hand", "n_layers": 2, "dim": 8, "n_heads": 2, "n_kv_heads": 1, "head_dim": 4,
         "ffn_dim": 16, "vocab_size": 32, "tied_embeddings": False, "dtype": "fp32", "dtype_bytes": 4}


def test_serving_bounds_hand_computed():
    # decode: 10,368 FLOPs and 8,000 B (see test_model_cost); device 1e6 FLOP/s, 1e6 B/s
    spec = {"peak_flops": 1e6, "bandwidth": 1e6}
    out = bounds.serving_bounds(SHAPE, spec, batch=3, context_len=10, prompt_tokens=5)
    assert out["tpot_lower_bound_ms"] == pytest.approx(10368 / 1e6 * 1e3)
    assert out["tpot_binding"] == "compute"
    assert out["decode_tokens_per_s_upper_bound"] == pytest.approx(3 / 0.010368)
    # prefill: 15,040 FLOPs; bytes = 6,816 weights + 5 * 64 K/V = 7,136
    assert out["ttft_lower_bound_ms"] == pytest.approx(15.040)
    assert out["prefill"]["bytes"] == 7136
    assert out["evidence"] == "calculated" and out["complete"]
    bw_bound = bounds.serving_bounds(SHAPE, {"peak_flops": 1e15, "bandwidth": 1e6}, 3, 10, 5)
    assert bw_bound["tpot_binding"] == "memory"
    assert bw_bound["tpot_lower_bound_ms"] == pytest.approx(8.0)
    assert model_cost.decode_step_bytes(SHAPE, 3, 10) == 8000
    assert not math.isnan(bw_bound["ttft_lower_bound_ms"])
