"""The forecast beside the measured frontier (analysis/predict/overlay.py), fed point rows."""
import pytest

from analysis.predict.overlay import overlay


def row(v, x, y, tput, fx, ftput):
    return {"value": v, "run_dir": f"concurrency-{v}", "interactivity_tok_s": {"p50": x},
            "output_throughput_per_accelerator": y, "output_throughput": tput,
            "forecast": {"grade": "calibrated", "interactivity_tok_s_p50": fx,
                         "output_throughput": ftput, "error": {}}}


def test_the_forecast_per_accelerator_and_its_error():
    res = overlay([row(1, 100, 50, 100, 110, 120), row(4, 40, 120, 240, 44, 200),
                   {"value": 8, "run_dir": "concurrency-8"}])            # no forecast: left out
    assert res["grade"] == "calibrated" and len(res["points"]) == 2
    p = res["points"][0]
    assert p["run"] == "concurrency-1" and p["value"] == 1
    assert (p["x"], p["y"]) == (110.0, 60.0)           # 2 accelerators: 100 / 50
    assert p["error"]["x"] == pytest.approx(0.1) and p["error"]["y"] == pytest.approx(0.2)
    assert res["line"] == [[44.0, 100.0], [110.0, 60.0]]


def test_no_forecast_no_overlay_and_a_missing_figure_is_none():
    assert overlay([{"value": 1, "run_dir": "c-1"}]) is None
    p = overlay([row(1, None, None, None, 10, None)])["points"][0]
    assert p["x"] == 10.0 and p["y"] is None and p["error"] == {"x": None, "y": None}
