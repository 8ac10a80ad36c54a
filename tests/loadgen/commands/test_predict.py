"""``loadgen predict``: the JSON line, the course's worked examples through the command, the
what-if label, one-line errors, and a calibrated forecast against the calibration server."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadgen.cli import main

ROOT = Path(__file__).resolve().parents[3]
POINT_KEYS = {"param", "value", "ttft_ms_p50", "tpot_ms_p50", "output_throughput",
              "interactivity_tok_s_p50"}


def spec_file(tmp_path, name, peak, bw):
    fig = lambda v, u: {"value": v, "unit": u, "evidence": "documented",  # noqa: E731
                        "source": "seed section 7 (worked example)"}
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps({"name": name, "scope": "1 chip",
                             "peak": {"bf16": fig(peak, "FLOP/s"), "fp32": fig(peak, "FLOP/s")},
                             "mem_bandwidth": fig(bw, "B/s")}))
    return p


def scenario(tmp_path, prompt=16, output=8, values=(1, 2, 4), target=None, calib=None):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "name": "predict-test",
        "target": target or {"server": {"kind": "jax", "preset": "tiny", "dtype": "bf16",
                                        "slots": 4}},
        "api": {"endpoint": "completions", "stream": True,
                **({"extra_body": {"calib": calib}} if calib else {})},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": prompt},
                     "output_tokens": {"dist": "fixed", "value": output}},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 8},
        "sweep": {"param": "load.concurrency", "values": list(values)},
        "output": {"dir": str(tmp_path / "runs"), "report": "none"}}))
    return p


def predict_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["predict", *map(str, args), "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    return json.loads(out[0])


def test_json_line_has_the_exact_keys(tmp_path, capsys):
    res = predict_json(capsys, scenario(tmp_path), "--device", "h100-sxm")
    assert {"grade", "fit", "points"} <= set(res)
    assert res["grade"] == "spec-only" and res["fit"] is None
    assert [p["value"] for p in res["points"]] == [1, 2, 4]
    for p in res["points"]:
        assert set(p) == POINT_KEYS and p["param"] == "load.concurrency"
        assert all(p[k] > 0 for k in POINT_KEYS - {"param", "value"})


def test_half_the_compute_twice_the_bandwidth_decodes_twice_as_fast(tmp_path, capsys):
    """Seed section 7: B (100 TFLOP/s, 2 TB/s) against A (200 TFLOP/s, 1 TB/s). Decode at one
    user is bandwidth-bound: B's TPOT is half A's; a 2048-token prefill is compute-bound: B's
    TTFT is twice A's."""
    sc = scenario(tmp_path, prompt=2048, output=8, values=[1])
    a = predict_json(capsys, sc, "--device", spec_file(tmp_path, "A", 200e12, 1e12))["points"][0]
    b = predict_json(capsys, sc, "--device", spec_file(tmp_path, "B", 100e12, 2e12))["points"][0]
    assert b["tpot_ms_p50"] == pytest.approx(a["tpot_ms_p50"] / 2, rel=1e-9)
    assert b["ttft_ms_p50"] == pytest.approx(a["ttft_ms_p50"] * 2, rel=1e-9)


def test_another_catalogue_device_is_a_labelled_spec_only_what_if(tmp_path, capsys):
    res = predict_json(capsys, scenario(tmp_path), "--device", "tpu-v5e")
    assert res["grade"] == "spec-only" and res["device"]["what_if"] is True
    assert res["evidence"].startswith("calculated") and "never a measurement" in res["evidence"]


def one_line_error(*args, home):
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "predict", *map(str, args)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("loadgen: error: "), r.stderr
    return lines[0]


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_no_device_spec_and_a_bad_device_are_one_line_errors(tmp_path):
    sc = scenario(tmp_path)
    assert "--device" in one_line_error(sc, home=tmp_path)          # no calibration in HOME
    assert "'nope'" in one_line_error(sc, "--device", "nope", home=tmp_path)
    assert "--calibrate" in one_line_error(sc, "--device", "h100-sxm", "--calibrate",
                                           home=tmp_path)


def test_calibrated_forecast_on_the_calibration_server(calib_server, tmp_path, capsys):
    """The calibration server answers TTFT 30 ms and a token every 10 ms whatever the load: the
    probes (kept run directories) fit the overheads, and the forecast gives those figures."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64,
                               "num_attention_heads": 4, "intermediate_size": 128,
                               "vocab_size": 256, "torch_dtype": "bfloat16"}))
    sc = scenario(tmp_path, prompt=8, output=6, values=[1, 2],
                  target={"url": calib_server.url}, calib={"ttft_ms": 30, "itl_ms": 10})
    res = predict_json(capsys, sc, "--calibrate", "--model-config", cfg,
                       "--device", spec_file(tmp_path, "A", 200e12, 1e12))
    assert res["grade"] == "calibrated"
    fit = res["fit"]
    assert set(fit["overheads"]) == {"step_ms", "per_seq_ms", "prefill_ms", "prefill_req_ms",
                                     "turnaround_ms"}
    assert fit["residuals"] and fit["rms_rel_error"] is not None
    assert [p["concurrency"] for p in fit["probes"]] == [1, 2]
    for p in fit["probes"]:
        assert (Path(p["run_dir"]) / "summary.json").is_file()
    for p in res["points"]:
        assert p["tpot_ms_p50"] == pytest.approx(10.0, rel=0.2)
        assert p["ttft_ms_p50"] == pytest.approx(30.0, rel=0.25)


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_server_without_a_shape_and_a_trace_load_are_one_line_errors(calib_server, tmp_path):
    sc = scenario(tmp_path, target={"url": calib_server.url})
    assert "--model-config" in one_line_error(sc, "--device", "h100-sxm", home=tmp_path)
    tr = tmp_path / "t.yaml"
    tree = yaml.safe_load(scenario(tmp_path).read_text())
    tree["load"] = {"mode": "concurrency", "duration_s": 10,
                    "stages": [{"concurrency": 2, "duration_s": 5}]}
    tree.pop("sweep")
    tr.write_text(yaml.safe_dump(tree))
    assert "load.stages" in one_line_error(tr, "--device", "h100-sxm", home=tmp_path)


def test_offline_without_a_cap_sends_every_request_at_once():
    from analysis.predict.forecast import point_load
    from loadgen.scenario.model import Load
    offline = Load(mode="offline", num_requests=12).point_shape
    lp = point_load("load.concurrency", 0, {"num_requests": 12, "concurrency": None}, **offline)
    assert lp.kind == "closed" and lp.concurrency == 12
