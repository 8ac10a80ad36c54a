"""`loadgen calibrate` measures real copies and matmuls (tiny sizes here) and saves a loadable spec."""
import argparse
import json

import pytest

from analysis.roofline import calibrate
from analysis.roofline import devices
from analysis.roofline import bounds
from loadgen.commands import calibrate as cmd


def test_measure_copy_and_matmul_numpy():
    cp = calibrate.measure_copy("numpy", 8 * 2**20, repeats=3)
    assert cp["bytes_per_s"] > 1e8 and cp["runs"] == 3
    assert cp["bytes_per_s"] == pytest.approx(2 * 8 * 2**20 / cp["median_s"])
    mm = calibrate.measure_matmul("numpy", 128, "fp32", repeats=3)
    assert mm["flops_per_s"] == pytest.approx(2 * 128**3 / mm["median_s"])
    with pytest.raises(ValueError):
        calibrate.measure_matmul("numpy", 64, "bf16", repeats=1)


def test_jax_backend():
    pytest.importorskip("jax")
    cp = calibrate.measure_copy("jax", 4 * 2**20, repeats=3)
    mm = calibrate.measure_matmul("jax", 128, "bf16", repeats=3)
    assert cp["bytes_per_s"] > 0 and mm["flops_per_s"] > 0


def test_calibrate_spec_roundtrip(tmp_path):
    spec = calibrate.calibrate("cpu", copy_bytes=8 * 2**20, matmul_n=128, repeats=3,
                               retry_pause_s=0)
    # "measured", or "measured (busy host: ...)" on a loaded test machine
    assert spec.meta["evidence"].startswith("measured") and spec.meta["kind"] == "cpu"
    assert spec.meta["host_load"]["spreads"]["copy"] is not None
    assert spec.mem_bandwidth.evidence == "measured" and spec.bandwidth() > 0
    assert spec.peak_flops("fp32") > 0
    assert "cpu" in spec.match
    p = devices.save_spec(spec, tmp_path / "cal.json")
    back = devices.load_spec(p)
    assert back.bandwidth() == spec.bandwidth()
    b = bounds.bound(1e9, 1e9, back, "fp32")
    assert b.complete and b.time_s > 0


def _args(**kw):
    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    argv = []
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return p.parse_args(argv)


def test_cli_writes_spec(tmp_path, capsys):
    out = tmp_path / "c.json"
    rc = cmd.main(_args(device="cpu", out=out, copy_mib=8, matmul_n=128, repeats=3, dtypes="fp32"))
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["meta"]["evidence"].startswith("measured") and d["mem_bandwidth"]["value"] > 0
    assert "saved" in capsys.readouterr().out


def test_cli_bad_input_exit_2(tmp_path, capsys):
    assert cmd.main(_args(device="fpga", out=tmp_path / "x.json")) == 2
    assert "--device" in capsys.readouterr().err
    assert cmd.main(_args(device="cpu", out=tmp_path / "x.json", dtypes="int4")) == 2
    assert cmd.main(_args(device="cpu", out=tmp_path / "x.json", repeats=0)) == 2
    assert not (tmp_path / "x.json").exists()
