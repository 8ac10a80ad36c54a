"""summary.json's roofline block: the frozen spec, per-request prefill floors, broken floors."""
import json

import pytest

from analysis.metrics import summary as summary_mod
from analysis.report import run_report
from analysis.roofline import devices, run_device, model_cost, bounds
from analysis.roofline.run_roofline import BROKEN, roofline_summary
from tests.analysis.synth import TINY_SHAPE, jax_sut, rec, server_meta, spec_file, steady, write_run


def _device(bandwidth=1e10, peak=1e12, name="test-device"):
    spec = devices.DeviceSpec(name, "1 chip", peak={"fp32": devices.Figure(peak, "FLOP/s",
                                                                           "documented", "t")},
                              mem_bandwidth=devices.Figure(bandwidth, "B/s", "documented", "t"))
    return {"source": "frozen", "how": "test", "spec": spec}


def _freeze(d, spec_path):
    run_device.write(d, run_device.record(devices.load_spec(spec_path), f"spec file {spec_path}"))


def _prefill_floor_ms(p, dev):
    return bounds.bound(model_cost.prefill_flops(TINY_SHAPE, p),
                          model_cost.weight_bytes(TINY_SHAPE)
                          + p * model_cost.kv_bytes_per_token(TINY_SHAPE),
                          dev["spec"], "fp32").time_s * 1e3


def test_frozen_spec_figures_in_summary_and_report(tmp_path):
    # 20 requests 50 ms apart, each 100 ms long: 1.9 in flight on average -> batch 2
    recs = steady(20)
    d = write_run(tmp_path / "run", recs, server_meta(), jax_sut())
    _freeze(d, spec_file(tmp_path / "spec.json"))
    r = summary_mod.summarize_run(d)["roofline"]
    assert r["status"] == "calculated" and r["device"]["name"] == "test-device"
    want = {"source": "frozen", "mem_bandwidth": 1e10, "evidence": "documented",
            "measured_at": None}
    assert {k: r["device"][k] for k in want} == want
    dec = r["decode"]
    assert (dec["batch"], dec["context_len"], dec["prompt_tokens"]) == (2, 14, 10)
    step_bytes = model_cost.decode_step_bytes(TINY_SHAPE, 2, 14)
    assert dec["step_bytes"] == step_bytes
    assert r["decode_floor_ms"] == pytest.approx(step_bytes / 1e10 * 1e3)   # memory-bound
    assert r["tpot_p50_ms"] == pytest.approx(80 / 7)
    assert r["mbu"] == pytest.approx(step_bytes / (80 / 7 / 1e3) / 1e10)
    assert r["broken_floors"] == []
    _, page = run_report.write_report(d, with_plots=False)
    text = page.read_text()
    assert "decode floor (ms): memory / compute, binding" in text
    assert "device.json: spec file" in text


def test_prefill_floor_is_per_request_not_the_mean_prompt():
    dev = _device(bandwidth=1e8, peak=1e9)
    # three requests with their own prompts; TTFT = own floor / ratio; the 0.9 one is nearest
    rows = [(68, 0.5), (200, 0.9), (400, 0.7)]
    recs = []
    for i, (p, ratio) in enumerate(rows):
        ttft = _prefill_floor_ms(p, dev) / ratio
        recs.append(rec(i, sched=i * 1000, sent=i * 1000, prompt=p,
                        chunks=[[i * 1000 + ttft, 1], [i * 1000 + ttft + 50, 1]]))
    r = roofline_summary(recs, TINY_SHAPE, dev)
    pre = r["prefill"]
    assert pre["prompt_tokens"] == 200 and pre["requests"] == 3 and pre["below_floor"] == 0
    assert r["prefill_floor_ms"] == pytest.approx(_prefill_floor_ms(200, dev))
    assert pre["floor_over_ttft"] == pytest.approx(0.9, rel=1e-6)
    assert pre["floor_ms_min"] == pytest.approx(_prefill_floor_ms(68, dev))
    # the mean prompt (~223 tokens) has another floor: not what is compared
    assert r["prefill_floor_ms"] != pytest.approx(_prefill_floor_ms(223, dev))
    assert r["broken_floors"] == []


def test_a_floor_above_a_measurement_is_a_broken_floor_not_mbu_above_1():
    dev = _device(bandwidth=1e6)          # a spec far too slow for this "device"
    recs = steady(10)
    r = roofline_summary(recs, TINY_SHAPE, dev)
    assert r["decode_floor_ms"] > r["tpot_p50_ms"]
    assert r["mbu"] is None and r["decode"]["floor_over_measured"] > 1
    figs = {b["figure"]: b for b in r["broken_floors"]}
    assert set(figs) == {"TPOT p50", "TTFT"}
    assert figs["TPOT p50"]["text"].endswith(BROKEN)
    assert figs["TTFT"]["text"].startswith("10 of 10 requests had a TTFT below their own prefill")
    assert r["prefill"]["below_floor"] == 10


def test_broken_floor_is_shown_in_the_report(tmp_path):
    d = write_run(tmp_path / "run", steady(10), server_meta(), jax_sut())
    _freeze(d, spec_file(tmp_path / "spec.json", bandwidth=1e6))
    summary_mod.write_summary(d)
    assert json.loads((d / "summary.json").read_text())["roofline"]["mbu"] is None
    md, _ = run_report.write_report(d, with_plots=False)
    text = md.read_text()
    assert "measured below the floor: the spec is wrong or the boundary differs" in text
    assert "n/a (broken floor)" in text


def test_missing_inputs_are_none_with_the_reason():
    r = roofline_summary(steady(5), None, _device())
    assert r["status"] == "unavailable" and "no model shape" in r["reason"]
    assert all(r[k] is None for k in ("mbu", "tpot_p50_ms", "decode_floor_ms", "prefill_floor_ms"))
    r = roofline_summary(steady(5), TINY_SHAPE, None)
    assert r["reason"] == run_device.NOT_RECORDED and r["device"] is None


def test_old_run_dir_without_device_json_says_not_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))          # a calibration cache exists: never read
    cache = tmp_path / ".cache" / "loadgen" / "calibration.json"
    cache.parent.mkdir(parents=True)
    spec_file(cache)
    d = write_run(tmp_path / "run", steady(10), server_meta(), jax_sut())
    r = summary_mod.summarize_run(d)["roofline"]
    assert r["status"] == "unavailable" and "device spec not recorded" in r["reason"]
    # an explicit override recomputes, and says so
    with run_device.override(run_device.parse_override("calibrate")):
        r = summary_mod.summarize_run(d)["roofline"]
    assert r["status"] == "calculated"
    assert r["device"]["source"] == "override" and r["device"]["frozen"] is None
    assert r["device"]["how"].startswith("--device calibrate")


def test_parse_override_bad_values_name_the_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ValueError, match="^--device calibrate: no calibration at"):
        run_device.parse_override("calibrate")
    with pytest.raises(ValueError, match="^--device: 'tpu-v9' is neither"):
        run_device.parse_override("tpu-v9")
    assert run_device.parse_override("h100-sxm")["spec"].name == "NVIDIA H100 SXM"
