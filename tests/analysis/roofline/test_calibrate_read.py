"""calibrate's read-bandwidth probe (the roof) beside the copy (kept, labelled): the probe's
arithmetic on a small buffer, the figures a calibration keeps, old copy-only files, and the
spec-only forecast a read bandwidth gives. No timing is asserted (fakes where a time matters)."""
import json

import pytest

from analysis.predict.forecast import forecast
from analysis.predict.simulate import LoadPoint
from analysis.roofline import calib_probes, calibrate, devices
from servers.jax.presets import get_preset, shape_dict

TINY = shape_dict(get_preset("tiny"), "fp32", 4096, 4)


def test_read_shape_streams_whole_rows_of_the_buffer():
    assert calib_probes.read_shape(2**20) == (64, 4096)             # 1 MiB fp32: 64 rows of 4096
    assert calib_probes.read_shape(3 * 4096 * 4 + 100) == (3, 4096)  # the remainder is not read
    assert calib_probes.read_shape(4000) == (1, 1000)               # below a row: one row of it
    assert calib_probes.read_shape(0) == (1, 1)


def test_measure_read_counts_the_bytes_of_a_once(monkeypatch):
    calls = []

    def fixed(run, repeats, budget_s):                 # one real GEMV, then a fixed time
        calls.append(run())
        return 0.25, [0.25] * repeats
    monkeypatch.setattr(calib_probes, "_median_time", fixed)
    rd = calib_probes.measure_read("numpy", 2**20, repeats=3)
    assert rd["bytes"] == 64 * 4096 * 4 == 2**20
    assert rd["bytes_per_s"] == 2**20 / 0.25 and rd["runs"] == 3 and rd["backend"] == "numpy"
    assert "counted bytes read" in rd["method"] and "[64, 4096]" in rd["method"]
    assert len(calls) == 1 and calls[0] >= 0
    with pytest.raises(ValueError):
        calib_probes.measure_read("fpga", 2**20, repeats=1)


def test_measure_read_numpy_real_small_buffer():
    rd = calib_probes.measure_read("numpy", 2**20 + 7, repeats=3)
    assert rd["bytes"] == 2**20 and rd["runs"] == 3
    assert rd["bytes_per_s"] == pytest.approx(rd["bytes"] / rd["median_s"])


def _fig(rate, backend, key="bytes_per_s"):
    return {key: rate, "median_s": 0.01, "runs": 3, "backend": backend, "spread": 0.01,
            "method": f"{backend} fake"}


def fake_spec(monkeypatch, reads=(3e10, 2e10), copy=1.5e10, read_fails=False):
    """A calibration with fixed probe results: reads per backend (jax, numpy), one copy."""
    backends = iter(("jax", "numpy"))
    rates = iter(reads)

    def read(backend, nbytes, repeats):
        if read_fails:
            raise RuntimeError("no read")
        next(backends)
        return _fig(next(rates), backend)
    monkeypatch.setattr(calibrate, "measure_read", read)
    monkeypatch.setattr(calibrate, "measure_copy", lambda b, n, r: _fig(copy, b))
    monkeypatch.setattr(calibrate, "measure_matmul",
                        lambda b, n, dt, r: _fig(1e11, b, "flops_per_s"))
    plan = dict(name="fake cpu", kind="cpu", copy_backend="numpy",
                read_backends=["jax", "numpy"], mm_backends={"fp32": ["numpy"]},
                copy_bytes=2**20, matmul_n=64)
    quiet = {"t": 0.0, "loadavg_1m": 0.1}
    return calibrate._measure(plan, 3, ("fp32",), lambda s: None, lambda: dict(quiet))


def test_the_best_read_is_the_roof_and_the_copy_is_kept_beside_it(monkeypatch, tmp_path):
    spec = fake_spec(monkeypatch)
    assert spec.bandwidth() == 3e10 and spec.mem_bandwidth.evidence == "measured"
    cond = spec.mem_bandwidth.conditions
    assert "jax fake" in cond and "15.0 GB/s" in cond
    cp = spec.other["copy_bandwidth"]
    assert cp.value == 1.5e10 and "not the roof" in cp.conditions
    m = spec.meta["methods"]
    assert m["copy"]["bytes_per_s"] == 1.5e10 and m["read"]["bytes_per_s"] == 3e10
    assert [r["backend"] for r in m["read_all"]] == ["jax", "numpy"]
    assert set(spec.meta["host_load"]["spreads"]) >= {"copy", "read"}
    back = devices.load_spec(devices.save_spec(spec, tmp_path / "cal.json"))
    assert back.bandwidth() == 3e10 and back.other["copy_bandwidth"].value == 1.5e10
    assert not calibrate.copy_only(back)
    assert calibrate.numpy_read(back) == 2e10          # a spot check (numpy) compares with this


def test_no_read_probe_the_copy_stands_in_and_says_so(monkeypatch):
    spec = fake_spec(monkeypatch, read_fails=True)
    assert spec.bandwidth() == 1.5e10 and "no read probe ran" in spec.mem_bandwidth.conditions
    assert "read" not in spec.meta["methods"] and spec.meta["methods"]["read_errors"]


def test_a_calibration_saved_before_the_read_probe_still_loads(tmp_path):
    """The old format: mem_bandwidth the copy's, methods without "read", no "other"."""
    old = {"name": "local cpu: old", "scope": "this host (cpu)",
           "peak": {"fp32": {"value": 1e11, "unit": "FLOP/s", "evidence": "measured",
                             "source": "s"}},
           "mem_bandwidth": {"value": 1.2e10, "unit": "B/s", "evidence": "measured",
                             "source": "s", "conditions": "numpy copy of 256 MiB"},
           "meta": {"kind": "cpu", "methods": {"copy": {"bytes_per_s": 1.2e10}}}}
    p = tmp_path / "old.json"
    p.write_text(json.dumps(old))
    spec = devices.load_spec(p)
    assert spec.bandwidth() == 1.2e10 and spec.other == {}
    assert calibrate.copy_only(spec) and calibrate.numpy_read(spec) == 1.2e10
    assert not calibrate.copy_only(devices.get("h100-sxm"))    # a catalogue spec: no methods


def test_the_spec_only_forecast_from_the_read_bandwidth_is_lower(monkeypatch):
    """Issue 40: the copy (read + write) understated this CPU's weight reads, so the spec-only
    "bound" was slower than measured at concurrency 1. A read bandwidth above the copy gives a
    lower (faster) floor: TPOT lower and throughput higher at every point; TTFT no higher (the
    64-token prefill here is compute-bound, the same under either bandwidth)."""
    spec = fake_spec(monkeypatch, reads=(3e10, 2e10), copy=1.5e10)
    old = devices.DeviceSpec.from_dict(spec.to_dict())
    old.mem_bandwidth = old.other.pop("copy_bandwidth")      # as a copy-only calibration saved it
    work = {"prompt_tokens": {"dist": "fixed", "value": 64},
            "output_tokens": {"dist": "fixed", "value": 16}}
    pts = [("load.concurrency", c, LoadPoint("closed", concurrency=c)) for c in (1, 4)]
    load = {"num_requests": 8}
    new_fc = forecast(TINY, spec, work, pts, load, slots=4)
    old_fc = forecast(TINY, old, work, pts, load, slots=4)
    assert new_fc["grade"] == old_fc["grade"] == "spec-only"
    for n, o in zip(new_fc["points"], old_fc["points"]):
        assert n["tpot_ms_p50"] < o["tpot_ms_p50"] and n["ttft_ms_p50"] <= o["ttft_ms_p50"]
        assert n["output_throughput"] > o["output_throughput"]
    # batch 1 is bandwidth-bound: the TPOT floor scales with 1 / BW exactly (2x the bandwidth)
    assert new_fc["points"][0]["tpot_ms_p50"] == pytest.approx(
        old_fc["points"][0]["tpot_ms_p50"] * 1.5e10 / 3e10, rel=1e-9)


def test_torch_bf16_is_not_timed_where_it_is_emulated(monkeypatch):
    """On an AVX2 CPU torch's bf16 matmul is emulated (a 2048³ one took 58 s here, `loadgen
    calibrate` 8 minutes): the CPU plan times JAX's bf16 instead; torch's fp32 stays."""
    import types
    from analysis.roofline import calibrate as cal
    for cap, want in (("AVX2", False), ("DEFAULT", False), ("AVX512", True)):
        fake = types.SimpleNamespace(backends=types.SimpleNamespace(
            cpu=types.SimpleNamespace(get_cpu_capability=lambda c=cap: c)))
        real = cal.importlib.import_module
        monkeypatch.setattr(cal.importlib, "import_module",
                            lambda name, f=fake: f if name == "torch" else real(name))
        assert cal.torch_bf16_usable() is want
        plan = cal._plan("cpu", None, None)
        if "torch-cpu" in plan["mm_backends"]["fp32"]:
            assert ("torch-cpu" in plan["mm_backends"]["bf16"]) is want
            assert plan["mm_backends"]["bf16"]
        monkeypatch.undo()
