"""The roofline for a managed server's run: a short calibration once per host, and the console line."""
import json

from loadgen.run import calibration as calmod
from loadgen.run.progress import roofline_line
from analysis.metrics.summary import summarize
from tests.analysis.synth import jax_sut, server_meta, spec_file, steady, write_run


def run_dir(tmp_path, meta_over=None, sut=None):
    recs = steady(20, tokens=8)
    meta = server_meta(**(meta_over or {}))
    sut = sut or dict(jax_sut(), client_host=dict(jax_sut()["client_host"], hostname="h1"))
    return write_run(tmp_path / "run", recs, meta, sut), recs, meta


def test_console_line_shows_tpot_against_the_decode_floor(tmp_path):
    d, recs, meta = run_dir(tmp_path, {"device_spec": str(spec_file(tmp_path / "spec.json"))})
    line = roofline_line(summarize(recs, meta), d)
    assert line.startswith("roofline (test-device, spec file")
    assert "TPOT p50 " in line and "vs decode floor" in line and "MB/step ÷ 10.0 GB/s" in line
    assert "MBU" in line and "prefill floor" in line


def test_without_a_device_spec_the_line_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr("analysis.report.conditions.CALIBRATION", tmp_path / "none.json")
    d, recs, meta = run_dir(tmp_path)
    from analysis.report import conditions
    r = conditions.roofline_section(summarize(recs, meta), meta, json.loads((d / "sut.json").read_text()),
                                    recs, tmp_path / "none.json")
    assert r["status"] == "unavailable" and "no device spec" in r["reason"]


def test_calibration_runs_once_then_is_cached(tmp_path, monkeypatch):
    monkeypatch.delenv("LOADGEN_NO_CALIBRATION", raising=False)
    monkeypatch.setattr(calmod, "COPY_BYTES", 4 * 2**20)
    monkeypatch.setattr(calmod, "REPEATS", 2)
    import socket
    host = socket.gethostname()
    d, _, _ = run_dir(tmp_path, sut=dict(jax_sut(), client_host=dict(jax_sut()["client_host"],
                                                                     hostname=host)))
    cal = tmp_path / "calibration.json"
    first = calmod.ensure_host_calibration(d, cal)
    assert first["status"] == "ran" and cal.is_file(), first
    spec = json.loads(cal.read_text())
    assert spec["mem_bandwidth"]["evidence"] == "measured" and spec["mem_bandwidth"]["value"] > 0
    second = calmod.ensure_host_calibration(d, cal)
    assert second["status"] == "cached" and "local calibration" in second["reason"]


def test_calibration_is_skipped_without_a_model_shape_or_when_asked(tmp_path, monkeypatch):
    d, _, _ = run_dir(tmp_path, sut={"client_host": {"hostname": "h1"}})
    monkeypatch.delenv("LOADGEN_NO_CALIBRATION", raising=False)
    assert calmod.ensure_host_calibration(d, tmp_path / "c.json")["status"] == "skipped"
    monkeypatch.setenv("LOADGEN_NO_CALIBRATION", "1")
    assert "LOADGEN_NO_CALIBRATION" in calmod.ensure_host_calibration(d, tmp_path / "c.json")["reason"]
