"""``loadgen sweep --predict``: each point's summary.json carries its forecast and the error,
frontier.json and frontier.png show the forecast beside the measured points; the spec-only
forecast is a bound the real JAX engine never beats (slow: the JAX server compiles once)."""
import json

import pytest

from loadgen.cli import main
from tests.loadgen.commands.test_predict import scenario, spec_file

FIGS = ("ttft_ms_p50", "tpot_ms_p50", "output_throughput", "interactivity_tok_s_p50")


def tiny_config(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64,
                               "num_attention_heads": 4, "intermediate_size": 128,
                               "vocab_size": 256, "torch_dtype": "bfloat16"}))
    return cfg


def sweep(capsys, sc, *flags) -> dict:
    capsys.readouterr()
    assert main(["sweep", str(sc), "--json", *map(str, flags)]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def check_forecasts(res: dict) -> list[dict]:
    from pathlib import Path
    d = Path(res["sweep_dir"])
    errs = []
    for p in res["points"]:
        s = json.loads((d / p["run_dir"] / "summary.json").read_text())
        f = s["forecast"]
        assert f["grade"] in ("spec-only", "calibrated") and set(FIGS) <= set(f)
        assert set(f["error"]) == set(FIGS)
        assert p["forecast"] == f
        errs.append(f["error"])
    fr = json.loads((d / "frontier.json").read_text())
    fc = fr["forecast"]
    assert [q["value"] for q in fc["points"]] == [p["value"] for p in res["points"]]
    assert all(set(q["error"]) == {"x", "y"} for q in fc["points"])
    return errs


def test_sweep_predict_on_the_calibration_server(calib_server, tmp_path, capsys):
    sc = scenario(tmp_path, prompt=8, output=5, values=[1, 2], target={"url": calib_server.url},
                  calib={"ttft_ms": 20, "itl_ms": 5})
    res = sweep(capsys, sc, "--predict", "--model-config", tiny_config(tmp_path),
                "--device", spec_file(tmp_path, "A", 200e12, 1e12))
    for e in check_forecasts(res):
        # a model whose roofline floor is microseconds: the spec-only bound is far below reality
        assert e["tpot_ms_p50"]["beats_bound"] is False
        assert e["output_throughput"]["beats_bound"] is False


def test_frontier_png_draws_the_forecast(tmp_path):
    pytest.importorskip("matplotlib")
    from analysis.report.plots_frontier import frontier_png
    fr = {"points": [{"x": 10.0, "y": 50.0, "on_frontier": True, "param": "load.concurrency",
                      "value": 1}], "line": [[10.0, 50.0]],
          "forecast": {"grade": "calibrated", "line": [[12.0, 400.0]],
                       "points": [{"x": 12.0, "y": 400.0, "x_measured": 10.0, "y_measured": 50.0,
                                   "error": {"x": 0.2, "y": 7.0}}]}}
    png, _ = frontier_png([("s", fr)])
    assert png and png.startswith(b"\x89PNG")


@pytest.mark.slow
def test_spec_only_forecast_is_a_bound_on_the_real_jax_engine(jax_url, tmp_path, capsys):
    """The session's JAX server (tiny preset, 4 slots). The device spec is an upper bound of any
    2-core CPU (10 TFLOP/s, 1 TB/s): the measured figures never beat the forecast."""
    sc = scenario(tmp_path, prompt=32, output=16, values=[1, 4], target={"url": jax_url})
    res = sweep(capsys, sc, "--predict", "--device", spec_file(tmp_path, "cpu-roof", 10e12, 1e12))
    for e in check_forecasts(res):
        for k in FIGS:
            assert e[k]["beats_bound"] is False, (k, e[k])
