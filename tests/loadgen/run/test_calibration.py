"""The device spec frozen into a run (device.json): calibrated once per host, never re-read later."""
import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.metrics.summary import summarize_run, write_summary
from analysis.roofline import calib_cache
from analysis.roofline import calibrate as cal
from analysis.roofline import devices
from loadgen.commands import report as report_cmd
from loadgen.run import calibration as calmod
from loadgen.console.progress import roofline_line
from loadgen.scenario.model import ScenarioError
from tests.analysis.synth import jax_sut, server_meta, spec_file, steady, write_run

HOST = socket.gethostname()
ROOT = Path(__file__).resolve().parents[3]


def run_dir(tmp_path, meta_over=None, host=HOST, sut=None):
    sut = sut or dict(jax_sut(), client_host=dict(jax_sut()["client_host"], hostname=host))
    return write_run(tmp_path / "run", steady(20, tokens=8), server_meta(**(meta_over or {})), sut)


def cached(path, bandwidth, busy=False, host=HOST):
    """A calibration file as `loadgen calibrate` saves it for this host's CPU."""
    path.parent.mkdir(parents=True, exist_ok=True)
    spec = json.loads(spec_file(path, bandwidth=bandwidth).read_text())
    label = "measured (busy host: load 1.9, spread 22 %)" if busy else "measured"
    spec["meta"] = {"host": host, "kind": "cpu", "date": "2026-12-03T10:00:00+00:00",
                    "evidence": label, "host_load": {"busy": busy}}
    path.write_text(json.dumps(spec))
    return path


class FakeCalibrate:
    """Stands in for analysis.roofline.calibrate.calibrate: a fixed spec, calls counted."""

    def __init__(self, bandwidth=3e10, busy=False):
        self.bandwidth, self.busy, self.calls = bandwidth, busy, 0

    def __call__(self, device, *args, **kw):
        self.calls += 1
        label = "measured (busy host: load 2.0, spread 30 %)" if self.busy else "measured"
        return devices.DeviceSpec(
            "local cpu: fake", "this host (cpu)",
            peak={"fp32": devices.Figure(1e11, "FLOP/s", "measured", "fake")},
            mem_bandwidth=devices.Figure(self.bandwidth, "B/s", "measured", "fake"),
            meta={"host": HOST, "kind": "cpu", "date": "2026-12-03T12:00:00+00:00",
                  "evidence": label, "host_load": {"busy": self.busy}})


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv("LOADGEN_NO_CALIBRATION", raising=False)
    monkeypatch.setattr(calmod, "spot_bandwidth", no_spot_check)   # this host's speed: not a fact


REAL_SPOT = calmod.spot_bandwidth


def test_the_spot_check_measures_this_host():
    assert REAL_SPOT() > 1e8          # B/s: a real copy, whatever this host's speed


def no_spot_check():
    raise OSError("no spot check in these tests")


def test_a_cached_calibration_far_off_a_spot_check_is_taken_again(tmp_path, monkeypatch):
    cache = cached(tmp_path / "calibration.json", 1.19e10)           # quiet, but 2x too slow now
    monkeypatch.setattr(calmod, "spot_bandwidth", lambda: 2.28e10)
    fresh = FakeCalibrate(bandwidth=2.3e10)
    monkeypatch.setattr(cal, "calibrate", fresh)
    d = run_dir(tmp_path)
    st = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert st["status"] == "ran" and fresh.calls == 1
    assert "11.9 GB/s" in st["reason"] and "22.8 GB/s" in st["reason"] and "92%" in st["reason"]
    assert devices.load_spec(cache).bandwidth() == 2.3e10
    assert summarize_run(d)["roofline"]["device"]["mem_bandwidth"] == 2.3e10
    # within DRIFT of the spot check: the cached one stands, nothing measured again
    monkeypatch.setattr(calmod, "spot_bandwidth", lambda: 2.0e10)
    st = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert st["status"] == "cached" and fresh.calls == 1
    # not allowed to calibrate (no managed server stopped here): no spot check either
    monkeypatch.setattr(calmod, "spot_bandwidth", lambda: 1e9)
    st = calmod.freeze_device(d, may_calibrate=False, calibration=cache)
    assert st["status"] == "cached" and fresh.calls == 1


def with_methods(path, methods):
    d = json.loads(path.read_text())
    d["meta"]["methods"] = methods
    path.write_text(json.dumps(d))
    return path


def test_a_cached_copy_only_calibration_is_taken_again_once(tmp_path, monkeypatch):
    """Saved before the read probe (methods without "read"): its bandwidth is a copy's, no
    bound, so the next managed run measures again; the new one (with a read) then stands."""
    cache = with_methods(cached(tmp_path / "calibration.json", 1.2e10),
                         {"copy": {"bytes_per_s": 1.2e10}})
    fresh = FakeCalibrate(bandwidth=2.3e10)
    monkeypatch.setattr(cal, "calibrate", fresh)
    d = run_dir(tmp_path)
    st = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert st["status"] == "ran" and fresh.calls == 1
    assert "predates the read-bandwidth probe" in st["reason"]
    assert devices.load_spec(cache).bandwidth() == 2.3e10


def test_the_spot_check_compares_with_the_calibrations_own_numpy_read(tmp_path, monkeypatch):
    """The roof is the best read backend (jax here, 3e10); the spot check is a numpy read, so it
    is compared with the calibration's numpy read (2e10), not with the roof."""
    cache = with_methods(cached(tmp_path / "calibration.json", 3e10), {
        "copy": {"bytes_per_s": 1.5e10}, "read": {"backend": "jax", "bytes_per_s": 3e10},
        "read_all": [{"backend": "jax", "bytes_per_s": 3e10},
                     {"backend": "numpy", "bytes_per_s": 2e10}]})
    monkeypatch.setattr(calmod, "spot_bandwidth", lambda: 2.1e10)   # 30 % below the roof
    fresh = FakeCalibrate(bandwidth=3e10)
    monkeypatch.setattr(cal, "calibrate", fresh)
    d = run_dir(tmp_path)
    st = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert st["status"] == "cached" and fresh.calls == 0
    monkeypatch.setattr(calmod, "spot_bandwidth", lambda: 1.0e10)   # half its numpy read: drift
    st = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert st["status"] == "ran" and "20.0 GB/s" in st["reason"] and fresh.calls == 1


def test_the_roofline_is_frozen_against_later_cache_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    cache = cached(tmp_path / ".cache" / "loadgen" / "calibration.json", 1e10)
    d = run_dir(tmp_path)
    status = calmod.freeze_device(d, may_calibrate=False, calibration=cache)
    assert status["status"] == "cached" and "local calibration" in status["reason"]
    dev = json.loads((d / "device.json").read_text())
    assert dev["status"] == "recorded" and dev["spec"]["mem_bandwidth"]["value"] == 1e10
    before = summarize_run(d)["roofline"]
    cached(cache, 2.6e10)                        # `loadgen calibrate` later measures more
    after = summarize_run(d)["roofline"]
    assert after == before and after["device"]["mem_bandwidth"] == 1e10
    assert after["device"]["measured_at"] == "2026-12-03T10:00:00+00:00"
    # `loadgen report RUN` keeps the frozen figures; --device calibrate recomputes, labelled
    args = argparse.Namespace(run_dir=str(d), no_plots=True, json=False, device=None)
    assert report_cmd.main(args) == 0
    assert json.loads((d / "summary.json").read_text())["roofline"]["mbu"] == before["mbu"]
    own = (d / "summary.json").read_text(), (d / "report.md").read_text()
    assert report_cmd.main(argparse.Namespace(**{**vars(args), "device": "calibrate"})) == 0
    r = json.loads((d / "summary-device-calibrate.json").read_text())["roofline"]
    assert r["device"]["source"] == "override" and r["device"]["mem_bandwidth"] == 2.6e10
    assert r["mbu"] == pytest.approx(before["mbu"] / 2.6)
    assert "Recomputed against --device calibrate" in (
        d / "report-device-calibrate.md").read_text()
    # the run's own files keep the spec frozen into it (issue 29 item 10)
    assert ((d / "summary.json").read_text(), (d / "report.md").read_text()) == own
    with pytest.raises(ScenarioError, match="^--device: 'nope' is neither"):
        report_cmd.main(argparse.Namespace(**{**vars(args), "device": "nope"}))


def test_console_line_compares_like_with_like(tmp_path):
    d = run_dir(tmp_path, {"device_spec": str(spec_file(tmp_path / "spec.json"))})
    calmod.freeze_device(d, may_calibrate=False, calibration=tmp_path / "none.json")
    line = roofline_line(summarize_run(d), d)
    assert line.startswith("roofline (test-device, frozen; evidence documented): TPOT p50 ")
    assert "vs decode floor" in line and "GB/s, batch 2)" in line and "MBU" in line
    assert "TTFT nearest its own prefill floor 20.00 ms vs " in line
    assert "(10-token prompt, 20 requests)" in line
    slow = run_dir(tmp_path / "b", {"device_spec": str(spec_file(tmp_path / "s.json", 1e6))})
    calmod.freeze_device(slow, may_calibrate=False, calibration=tmp_path / "none.json")
    line = roofline_line(summarize_run(slow), slow)
    assert "MBU" not in line
    assert "\nroofline: broken floor: TPOT p50 " in line and "the spec is wrong" in line


def test_no_spec_is_frozen_as_none_and_stays_none(tmp_path, monkeypatch):
    d = run_dir(tmp_path, host="another-box")
    status = calmod.freeze_device(d, may_calibrate=False, calibration=tmp_path / "none.json")
    assert status["status"] == "skipped" and "no managed server" in status["reason"]
    assert json.loads((d / "device.json").read_text())["status"] == "none"
    r = summarize_run(d)["roofline"]
    assert r["status"] == "unavailable" and r["reason"].startswith("no device spec at run time")
    assert roofline_line({"roofline": r}).startswith("roofline: not shown (no device spec")


def test_calibrates_once_then_uses_the_cache(tmp_path, monkeypatch):
    fake = FakeCalibrate()
    monkeypatch.setattr(cal, "calibrate", fake)
    cache = tmp_path / "calibration.json"
    d = run_dir(tmp_path)
    first = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert first["status"] == "ran" and first["evidence"] == "measured" and cache.is_file()
    assert json.loads((d / "device.json").read_text())["how"].startswith(f"calibrated on {HOST}")
    second = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert second["status"] == "cached" and fake.calls == 1


def test_a_busy_cached_calibration_is_taken_again(tmp_path, monkeypatch):
    cache = cached(tmp_path / "calibration.json", 9.7e9, busy=True)
    quiet = FakeCalibrate(bandwidth=2.6e10)
    monkeypatch.setattr(cal, "calibrate", quiet)
    d = run_dir(tmp_path)
    st = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert st["status"] == "ran" and "busy host" in st["reason"]
    assert devices.load_spec(cache).bandwidth() == 2.6e10
    assert summarize_run(d)["roofline"]["device"]["evidence"] == "measured"
    # busy again and slower than the cached one: the cached one is kept, still labelled
    cached(cache, 9.7e9, busy=True)
    monkeypatch.setattr(cal, "calibrate", FakeCalibrate(bandwidth=5e9, busy=True))
    st = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    assert "the cached one kept" in st["reason"]
    r = summarize_run(d)["roofline"]
    assert r["device"]["mem_bandwidth"] == 9.7e9
    assert r["device"]["evidence"] == "measured (busy host: load 1.9, spread 22 %)"


def test_calibration_is_skipped_without_a_model_shape_or_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(cal, "calibrate", FakeCalibrate())
    d = run_dir(tmp_path, sut={"client_host": {"hostname": HOST}})
    assert calmod.freeze_device(d, True, tmp_path / "c.json")["status"] == "skipped"
    monkeypatch.setenv("LOADGEN_NO_CALIBRATION", "1")
    d = run_dir(tmp_path / "b")
    st = calmod.freeze_device(d, True, tmp_path / "c.json")
    assert st["status"] == "skipped" and "LOADGEN_NO_CALIBRATION" in st["reason"]
    assert not (tmp_path / "c.json").exists()


def test_sweep_points_get_one_calibration_after_the_shared_server_stopped(tmp_path, monkeypatch):
    fake = FakeCalibrate()
    monkeypatch.setattr(cal, "calibrate", fake)
    cache = tmp_path / "calibration.json"
    points = [run_dir(tmp_path / f"p{i}") for i in range(3)]
    for d in points:                    # while the shared server ran: nothing to freeze
        assert calmod.freeze_device(d, False, cache)["status"] == "skipped"
    frozen_before = json.loads((points[2] / "device.json").read_text())
    frozen_before["spec"] = json.loads(spec_file(tmp_path / "s.json").read_text())
    (points[2] / "device.json").write_text(json.dumps(frozen_before))   # one had a spec
    changed = calmod.refreeze_after_shared_server(points, cache)
    assert changed == points[:2] and fake.calls == 1
    assert json.loads((points[1] / "meta.json").read_text())["calibration"]["status"] == "cached"
    assert json.loads((points[2] / "device.json").read_text())["spec"]["name"] == "test-device"


def test_device_json_says_which_calibration_the_run_used(tmp_path, monkeypatch):
    """Issue 29 item 11: a run took another process's busy-host spec without saying so."""
    monkeypatch.setattr(cal, "calibrate", FakeCalibrate())
    cache = tmp_path / "calibration.json"
    d = run_dir(tmp_path)
    calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    used = json.loads((d / "device.json").read_text())["calibration"]
    assert used["by_this_run"] is True and used["version"] == 1 and used["path"] == str(cache)
    assert used["saved_by_pid"] == os.getpid() and used["busy"] is False
    assert used["measured_at"] == "2026-12-03T12:00:00+00:00"
    other = run_dir(tmp_path / "b")            # a later run takes the cached one, and says whose
    calmod.freeze_device(other, may_calibrate=True, calibration=cache)
    took = json.loads((other / "device.json").read_text())["calibration"]
    assert took == {**used, "by_this_run": False}


def test_a_run_does_not_calibrate_while_another_holds_the_cache(tmp_path, monkeypatch):
    fake = FakeCalibrate()
    monkeypatch.setattr(cal, "calibrate", fake)
    cache = tmp_path / "calibration.json"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(cache)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(calib_cache, "LOCK_WAIT_S", 0.2)
        d = run_dir(tmp_path)
        st = calmod.freeze_device(d, may_calibrate=True, calibration=cache)
    finally:
        holder.communicate("go\n", timeout=30)
    assert fake.calls == 0 and "the cache's lock was not taken" in st["lock"]
    assert json.loads((d / "device.json").read_text())["status"] == "none"


HOLD = """
import sys
from analysis.roofline import calib_cache
with calib_cache.lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""
