"""analysis.energy.window on hand-computed traces: integration, windowing, wraparound, resets, J/token."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.energy import series as es
from analysis.energy.window import energy_summary
from analysis.energy.split import split_energy

S = 1_000_000_000  # ns per second


def counter_rows(source, device, scope, watts, t0_s, t1_s, hz=10, start_j=0.0, wrap_j=None):
    """A counter sampled at hz, rising at constant watts from start_j (raw, wrapped if wrap_j)."""
    n = int(round((t1_s - t0_s) * hz))
    rows = []
    for i in range(n + 1):
        t = t0_s + i / hz
        v = start_j + watts * (t - t0_s)
        if wrap_j:
            v = v % wrap_j
        row = {"t_ns": int(round(t * S)), "source": source, "device": device, "scope": scope,
               "kind": "energy_j", "value": v}
        if wrap_j:
            row["wrap_j"] = wrap_j
        rows.append(row)
    return rows


def power_rows(source, device, scope, watts, t0_s, t1_s, hz=10):
    n = int(round((t1_s - t0_s) * hz))
    return [{"t_ns": int(round((t0_s + i / hz) * S)), "source": source, "device": device,
             "scope": scope, "kind": "power_w", "value": watts} for i in range(n + 1)]


def mark(name, t_s):
    return {"t_ns": int(round(t_s * S)), "source": "session", "device": None, "scope": None,
            "kind": "mark", "value": name}


def src(name, evidence="measured", status="ok", reason=None):
    return {"name": name, "status": status, "reason": reason, "evidence": evidence, "warnings": []}


def steady_records(rate, seconds, out_tokens, gap_ms=1):
    """Requests at `rate`/s over [0, seconds), each streaming out_tokens tokens 1 ms apart."""
    recs = []
    for i in range(int(rate * seconds)):
        sent = int(i * S / rate)
        chunks = [[sent + (k + 1) * gap_ms * 1_000_000, 1] for k in range(out_tokens)]
        recs.append({"id": i, "phase": "measured", "status": "ok", "sent_at_ns": sent,
                     "first_token_at_ns": chunks[0][0], "end_at_ns": chunks[-1][0],
                     "chunks": chunks, "output_tokens": out_tokens})
    return recs


# ---- series primitives ----------------------------------------------------------------
def test_trapezoid_hand_computed():
    assert es.trapezoid_j([0, S, 2 * S], [100, 200, 100]) == pytest.approx(300.0)
    assert es.trapezoid_j([0], [100]) == 0.0


def test_window_interpolates_at_edges():
    u = es.unwrap_counter([0, 10 * S, 20 * S], [0.0, 1000.0, 3000.0])
    assert es.window_energy(u, 5 * S, 15 * S) == pytest.approx(500 + 1000)   # 1000-500, 2000-1000
    assert es.window_energy(u, -1, 15 * S) is None                           # not bracketed
    t, w = es.window_power_samples([0, 2 * S, 4 * S], [100, 300, 100], S, 3 * S)
    assert list(t) == [S, 2 * S, 3 * S] and list(w) == [200, 300, 200]
    assert es.trapezoid_j(t, w) == pytest.approx(500.0)


def test_wraparound_and_reset():
    wrapped = es.unwrap_counter([0, 1, 2, 3], [900.0, 950.0, 20.0, 70.0], wrap_j=1000.0)
    assert wrapped.cum_j[-1] == pytest.approx(50 + 70 + 50) and wrapped.wraps == [2]
    reset = es.unwrap_counter([0, 1, 2, 3], [900.0, 950.0, 20.0, 70.0])
    assert reset.cum_j[-1] == pytest.approx(50 + 20 + 50) and reset.resets == [2]
    assert es.counter_delta([5.0, 7.5, 9.0]) == pytest.approx(4.0)


# ---- the seed's worked example and the J/token method ----------------------------------
@pytest.mark.parametrize("watts,rate,expected", [(400.0, 100, 4.0), (250.0, 50, 5.0)])
def test_seed_example_joules_per_request(watts, rate, expected):
    rows = counter_rows("nvml", "gpu0", "gpu", watts, -1.0, 11.0)
    rows += [mark("measure_start", 0.0), mark("measure_end", 10.0)]
    recs = steady_records(rate, 10, out_tokens=10)
    e = energy_summary(rows, recs, None, [src("nvml")])
    assert e["status"] == "measured" and e["window"]["from"] == "marks"
    assert e["energy_j"] == pytest.approx(watts * 10)
    assert e["avg_power_w"] == pytest.approx(watts)
    assert e["j_per_request"] == pytest.approx(expected)
    assert e["j_per_request"] == pytest.approx(e["avg_power_w"] / rate)   # power / throughput
    assert e["j_per_output_token"] == pytest.approx(expected / 10)
    assert e["output_tokens_per_j"] == pytest.approx(10 / expected)


def test_j_per_token_counts_tokens_in_window_not_requests():
    rows = counter_rows("nvml", "gpu0", "gpu", 100.0, 0.0, 10.0)
    # one long request: 100 tokens spread over [0.5, 9.5] s; the window [2, 6] s holds some
    chunks = [[int((0.5 + 9.0 * k / 99) * S), 1] for k in range(100)]
    rec = {"id": 0, "phase": "measured", "status": "ok", "sent_at_ns": int(0.4 * S),
           "first_token_at_ns": chunks[0][0], "end_at_ns": chunks[-1][0], "chunks": chunks,
           "output_tokens": 100}
    in_win = sum(1 for t, _ in chunks if 2 * S < t <= 6 * S)
    e = energy_summary(rows, [rec], (2 * S, 6 * S), [src("nvml")])
    assert e["output_tokens"] == in_win
    assert e["energy_j"] == pytest.approx(400.0)
    assert e["j_per_output_token"] == pytest.approx(400.0 / in_win)
    assert e["j_per_request"] == pytest.approx(400.0 / in_win * 100)
    # no request lies wholly inside the window: the distribution has no members, not zeros
    assert e["per_request"]["requests_in_window"] == 0 and e["per_request"]["mean_j"] is None


def test_rapl_wraparound_trace_and_scopes_side_by_side():
    rows = counter_rows("nvml", "gpu0", "gpu", 300.0, 0.0, 4.0)
    rows += counter_rows("rapl", "package-0", "cpu_package", 60.0, 0.0, 4.0, start_j=200.0,
                         wrap_j=262.0)
    rows += counter_rows("rapl", "intel-rapl:0:0/dram", "dram", 10.0, 0.0, 4.0)
    rows += counter_rows("rapl", "intel-rapl:0:1/core", "cpu_core", 40.0, 0.0, 4.0)
    e = energy_summary(rows, [], (S, 3 * S), [src("nvml"), src("rapl")])
    bs = e["by_scope"]
    assert bs["gpu"]["energy_j"] == pytest.approx(600.0)
    assert bs["cpu_package"]["energy_j"] == pytest.approx(120.0)      # across the wrap at 262 J
    assert bs["dram"]["energy_j"] == pytest.approx(20.0)
    assert bs["cpu_core"]["energy_j"] == pytest.approx(80.0) and not bs["cpu_core"]["in_total"]
    assert e["energy_j"] == pytest.approx(740.0)                       # core is inside the package
    pkg = next(s for s in e["series"] if s["device"] == "package-0")
    assert any("wraparound" in n for n in pkg["notes"])


def test_reset_in_dcgm_trace_is_a_lower_bound_and_noted():
    rows = [{"t_ns": int(t * S), "source": "dcgm", "device": "gpu0", "scope": "gpu",
             "kind": "energy_j", "value": v} for t, v in
            [(0, 1000.0), (1, 1100.0), (2, 1200.0), (3, 50.0), (4, 150.0)]]
    e = energy_summary(rows, [], (0, 4 * S), [src("dcgm")])
    assert e["energy_j"] == pytest.approx(100 + 100 + 50 + 100)
    assert "reset" in e["series"][0]["notes"][0]


def test_power_only_series_is_integrated():
    rows = [{"t_ns": int(t * S), "source": "dcgm", "device": "gpu0", "scope": "gpu",
             "kind": "power_w", "value": w} for t, w in [(0, 100.0), (2, 300.0), (4, 100.0)]]
    e = energy_summary(rows, [], (S, 3 * S), [src("dcgm")])
    assert e["series"][0]["method"] == "integrated_power"
    assert e["energy_j"] == pytest.approx(500.0)


# ---- idle baseline, estimates, unmeasured ---------------------------------------------
def test_above_idle_is_separate_from_gross():
    rows = power_rows("nvml", "gpu0", "gpu", 50.0, 0.0, 2.0)
    rows += counter_rows("nvml", "gpu0", "gpu", 50.0, 0.0, 1.9)
    rows += counter_rows("nvml", "gpu0", "gpu", 150.0, 2.0, 12.0, start_j=100.0)
    rows += [mark("idle_start", 0.5), mark("idle_end", 1.5), mark("measure_start", 2),
             mark("measure_end", 12)]
    recs = steady_records(10, 10, out_tokens=5)
    for r in recs:
        for c in r["chunks"]:
            c[0] += 2 * S
        r["sent_at_ns"] += 2 * S
        r["end_at_ns"] += 2 * S
    e = energy_summary(rows, recs, None, [src("nvml")])
    assert e["energy_j"] == pytest.approx(150.0 * 10, rel=1e-3)
    ai = e["above_idle"]
    assert ai["idle_power_w"] == pytest.approx(50.0)
    assert ai["energy_j"] == pytest.approx(100.0 * 10, rel=1e-3)
    assert ai["j_per_request"] == pytest.approx(1000.0 / 500 * 5, rel=1e-3)
    assert "not the headline" in ai["label"]


def test_estimates_never_enter_measured_totals():
    rows = counter_rows("nvml", "gpu0", "gpu", 100.0, 0.0, 3.0)
    rows += power_rows("estimate", "manual", "system", 500.0, 0.0, 3.0)
    srcs = [src("nvml"), src("estimate", evidence="estimated")]
    e = energy_summary(rows, [], (0, 2 * S), srcs)
    assert e["status"] == "measured" and e["energy_j"] == pytest.approx(200.0)
    assert e["estimated"]["energy_j"] == pytest.approx(1000.0)
    only = energy_summary(power_rows("estimate", "manual", "system", 500.0, 0.0, 3.0), [],
                          (0, 2 * S), [src("estimate", evidence="estimated")])
    assert only["status"] == "estimated" and only["evidence"] == "estimated"
    assert only["energy_j"] == pytest.approx(1000.0) and only["per_request"] is None


def test_unmeasured_carries_the_reason_never_a_number():
    e = energy_summary([], [], None, [])
    assert e["status"] == "unmeasured" and "power.sources" in e["reason"]
    assert e["energy_j"] is None and e["j_per_request"] is None
    gone = [src("nvml", status="unavailable", reason="nvmlInit failed: no driver")]
    e = energy_summary([mark("measure_start", 0), mark("measure_end", 1)], [], None, gone)
    assert e["status"] == "unmeasured" and "nvmlInit failed" in e["reason"]
    short = counter_rows("nvml", "gpu0", "gpu", 100.0, 0.5, 1.0)
    e = energy_summary(short, [], (0, S), [src("nvml")])
    assert e["status"] == "unmeasured" and "bracket" in e["reason"]


# ---- per-request split --------------------------------------------------------------
def test_split_hand_computed_and_sums_to_total():
    grid = np.array([0, S, 2 * S, 3 * S, 4 * S])
    e_k = np.array([100.0, 100.0, 100.0, 100.0])
    a = {"phase": "measured", "status": "ok", "sent_at_ns": 0, "first_token_at_ns": int(0.5 * S),
         "end_at_ns": 3 * S, "chunks": [[int(0.5 * S), 1], [int(1.5 * S), 1]], "output_tokens": 2}
    b = {"phase": "measured", "status": "ok", "sent_at_ns": int(0.2 * S),
         "first_token_at_ns": int(0.6 * S), "end_at_ns": int(0.8 * S),
         "chunks": [[int(0.6 * S), 1], [int(0.7 * S), 1], [int(0.8 * S), 1]], "output_tokens": 3}
    sp = split_energy(grid, e_k, [a, b])
    # [0,1]: 1 token A (prefill), 3 tokens B (1 prefill, 2 decode); [1,2]: A decode;
    # [2,3]: no tokens, A alone in flight (decode, after its first token); [3,4]: unattributed
    assert list(sp["prefill_j"]) == pytest.approx([25.0, 25.0])
    assert list(sp["decode_j"]) == pytest.approx([200.0, 50.0])
    assert sp["unattributed_j"] == pytest.approx(100.0)
    assert sp["prefill_j"].sum() + sp["decode_j"].sum() + sp["unattributed_j"] == pytest.approx(400)


def test_summary_split_sums_to_window_energy_with_varying_power():
    rows = []
    for i in range(0, 101):                       # power 100..300 W, ramping, at 10 Hz
        t = i / 10
        rows.append({"t_ns": int(t * S), "source": "nvml", "device": "gpu0", "scope": "gpu",
                     "kind": "power_w", "value": 100.0 + 20.0 * t})
    rng = np.random.default_rng(0)
    recs = []
    for i in range(40):
        sent = int(rng.uniform(0.5, 8.0) * S)
        ts = np.sort(rng.uniform(0.05, 1.5, size=int(rng.integers(2, 30)))) * S + sent
        recs.append({"id": i, "phase": "measured", "status": "ok", "sent_at_ns": sent,
                     "first_token_at_ns": int(ts[0]), "end_at_ns": int(ts[-1]),
                     "chunks": [[int(t), 1] for t in ts], "output_tokens": len(ts)})
    e = energy_summary(rows, recs, (S, 9 * S), [src("nvml")])
    pr = e["per_request"]
    assert e["energy_j"] == pytest.approx(es.trapezoid_j(*es.window_power_samples(
        [r["t_ns"] for r in rows], [r["value"] for r in rows], S, 9 * S)))
    assert pr["attributed_j"] + pr["unattributed_j"] == pytest.approx(e["energy_j"])
    assert pr["prefill_j"] + pr["decode_j"] == pytest.approx(pr["attributed_j"])
    assert pr["requests_in_window"] > 0 and pr["p50_j"] <= pr["p90_j"] <= pr["p99_j"]


def test_every_status_has_the_same_keys():
    meas = energy_summary(counter_rows("nvml", "gpu0", "gpu", 100.0, 0.0, 3.0), [], (0, 2 * S),
                          [src("nvml")])
    est = energy_summary(power_rows("estimate", "manual", "system", 5.0, 0.0, 3.0), [], (0, 2 * S),
                         [src("estimate", evidence="estimated")])
    none = energy_summary([], [], None, [])
    assert (meas["status"], est["status"], none["status"]) == ("measured", "estimated", "unmeasured")
    assert set(meas) == set(est) == set(none)


def test_partial_measurement_names_what_is_missing():
    rows = counter_rows("nvml", "gpu0", "gpu", 100.0, 0.0, 3.0)
    rows += counter_rows("nvml", "gpu1", "gpu", 100.0, 1.5, 3.0)      # started late: no bracket
    srcs = [src("nvml"), src("rapl", status="unavailable", reason="no /sys/class/powercap")]
    e = energy_summary(rows, [], (0, 2 * S), srcs)
    assert e["status"] == "measured" and e["energy_j"] == pytest.approx(200.0)
    parts = " | ".join(e["unmeasured_parts"])
    assert "rapl: unavailable: no /sys/class/powercap" in parts and "nvml/gpu1" in parts


def test_mean_output_length_counts_zero_token_answers():
    # docs/energy.md: J/request = J/token x mean output length of the measured successful
    # requests; a successful answer of 0 tokens has length 0 (not missing), so it is averaged in
    rows = counter_rows("nvml", "gpu0", "gpu", 100.0, -1.0, 11.0)
    recs = steady_records(10, 10, out_tokens=10)
    empty = {"id": 999, "phase": "measured", "status": "ok", "sent_at_ns": 5 * S,
             "end_at_ns": 5 * S + 1_000_000, "chunks": [], "output_tokens": 0}
    e = energy_summary(rows, recs + [empty], (0, 10 * S), [src("nvml")])
    assert e["mean_output_tokens"] == pytest.approx(10 * 100 / 101)
    assert e["j_per_request"] == pytest.approx(e["j_per_output_token"] * 10 * 100 / 101)
