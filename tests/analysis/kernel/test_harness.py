"""The common kernel harness: byte/FLOP counts against the seed, every path against float64, clean
handling of missing frameworks, and the `loadgen kernel` command end to end (tiny repeat counts)."""
import argparse
import json

import numpy as np
import pytest

from analysis.kernel import harness
from analysis.kernel import decode as kernel_decode
from analysis.roofline.devices import DeviceSpec, Figure
from loadgen.commands import kernel as cmd

FAST = harness.Protocol(warmup=2, repeats=5, transfer_repeats=3)


def test_counts_match_the_seed():
    c = harness.KernelCase(128, 1024, 1024, "bf16")
    assert c.flops() == 268_435_456 and c.min_bytes() == 2_623_488
    assert round(c.intensity(), 2) == 102.32
    c = harness.KernelCase(1, 1024, 1024, "fp32")
    assert c.flops() == 2_097_152 and c.min_bytes() == 4_206_592
    assert round(c.intensity(), 2) == 0.50
    assert harness.KernelCase(128, dtype="fp32").min_bytes() == 5_246_976
    assert harness.KernelCase(1, dtype="bf16").min_bytes() == 2_103_296


def test_seed_rows_consistent_with_counts():
    # the seed's GB/s column is Q_min / device time: our counts reproduce it
    for dev in harness.SEED_ROWS:
        rows = harness.seed_rows(dev)
        assert len(rows) == 8
        for r in rows:
            assert r.bytes / (r.device_ms * 1e-3) / 1e9 == pytest.approx(r.gbps, rel=0.02)
            assert "seed" in r.evidence
    tpu = {(r.path, r.dtype, r.M): r for r in harness.seed_rows("tpu-v5e")}
    ratio = tpu[("jax-jit", "bf16", 1)].device_ms / tpu[("jax-jit", "bf16", 128)].device_ms
    assert ratio == pytest.approx(2_103_296 / 2_623_488, abs=0.002)


def test_inputs_random_and_tolerance_can_fail():
    case = harness.KernelCase(16, 64, 32, "fp32")
    x, w, b = harness.make_inputs(case, 0)
    assert np.count_nonzero(x) == x.size and np.count_nonzero(b) == b.size
    assert not np.array_equal(x, harness.make_inputs(case, 1)[0])
    ref = harness.reference(x, w, b)
    no_bias = harness.reference(x, w, np.zeros_like(b))
    tol = harness.tolerance("bf16", case.k, ref)
    assert np.max(np.abs(no_bias - ref)) > tol       # a kernel that drops b fails the check


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("path", ["torch-eager", "jax-eager", "jax-jit"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_path_matches_float64(path, dtype):
    row = harness.run_case(path, harness.KernelCase(128, 1024, 1024, dtype), FAST)
    assert row.status == "ok", row.reason
    assert row.passed, (row.max_abs_err, row.tolerance)
    assert row.max_abs_err < (1e-4 if dtype == "fp32" else 0.1)
    assert row.device_kind == "cpu" and row.first_ms > 0 and row.device_ms > 0
    assert row.transfer_ms > 0 and row.runs["device"] == 5 and row.runs["transfer"] == 3
    assert row.tflops == pytest.approx(row.flops / (row.device_ms * 1e-3) / 1e12)
    assert row.gbps == pytest.approx(row.bytes / (row.device_ms * 1e-3) / 1e9)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["torch-compile", "torch-compile-ro"])
def test_compiled_paths_match_float64(path):
    row = harness.run_case(path, harness.KernelCase(8, 256, 128, "fp32"), FAST)
    assert row.status in ("ok", "failed"), row.reason      # inductor may lack a compiler: a row
    if row.status == "ok":
        assert row.passed, (row.max_abs_err, row.tolerance)


def test_missing_framework_is_unavailable():
    rows = harness.run_matrix(["torch-eager", "jax-jit"], ["fp32"], [1], 64, 64, FAST,
                             modules={"torch": "no_such_torch_module", "jax": "no_such_jax_module"})
    assert [r.status for r in rows] == ["unavailable", "unavailable"]
    assert "no_such_torch_module" in rows[0].reason and rows[0].device_ms is None


def test_broken_framework_is_failed_row():
    # a module that imports but is not torch: the path fails with a one-line reason
    row = harness.run_case("torch-eager", harness.KernelCase(1, 8, 8), FAST, modules={"torch": "json"})
    assert row.status == "failed" and "\n" not in row.reason and row.reason


def test_bound_from_spec():
    spec = DeviceSpec("toy", "1", peak={"fp32": Figure(1e9, "FLOP/s", "measured", "t")},
                      mem_bandwidth=Figure(1e9, "B/s", "measured", "t"), meta={"evidence": "measured"})
    case = harness.KernelCase(1, 64, 64, "fp32")       # 8,192 FLOPs < 17,152 B: memory binds
    row = harness.run_case("jax-jit", case, FAST, spec_for=lambda kind, name: spec)
    assert row.bound_ms == pytest.approx(max(case.flops(), case.min_bytes()) / 1e9 * 1e3)
    assert row.binding == "memory" and row.spec == "toy"
    assert row.bound_fraction == pytest.approx(row.bound_ms / row.device_ms)


def test_choose_spec():
    cal = DeviceSpec("local cpu", "host", meta={"kind": "cpu"}, match=["cpu"])
    assert harness.choose_spec("cpu", "AMD", cal) is cal
    assert harness.choose_spec("cuda", "NVIDIA H200", cal).name == "NVIDIA H200"
    assert harness.choose_spec("cpu", "AMD", None) is None


def _args(*argv):
    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    return p.parse_args(list(argv))


def test_cli_table_json_csv(tmp_path, capsys):
    j, c = tmp_path / "k.json", tmp_path / "k.csv"
    rc = cmd.main(_args("--paths", "jax-jit,torch-eager", "-M", "4", "-K", "64", "-N", "32",
                        "--warmup", "1", "--repeats", "3", "--json", str(j), "--csv", str(c),
                        "--compare-seed", "--calibration", str(tmp_path / "none.json")))
    assert rc == 2                                           # missing calibration file named
    assert "--calibration" in capsys.readouterr().err
    rc = cmd.main(_args("--paths", "jax-jit,torch-eager", "-M", "4", "-K", "64", "-N", "32",
                        "--warmup", "1", "--repeats", "3", "--json", str(j), "--csv", str(c),
                        "--compare-seed", "--spec", "h200"))
    assert rc == 0
    out = capsys.readouterr().out
    assert "seed's measurements, 2026-10-19" in out and "A100-SXM4-40GB" in out
    d = json.loads(j.read_text())
    assert len(d["rows"]) == 4 and all(r["passed"] for r in d["rows"])
    assert d["rows"][0]["spec"] == "NVIDIA H200" and d["seed"]["a100"][0]["first_ms"] == 235.921
    assert c.read_text().count("\n") == 5


def test_cli_bad_input(capsys):
    assert cmd.main(_args("--paths", "tensorflow")) == 2
    assert "--paths" in capsys.readouterr().err
    assert cmd.main(_args("-M", "0")) == 2
    assert cmd.main(_args("--spec", "tpu-v9")) == 2


SHAPE = {"name": "hand", "n_layers": 2, "dim": 32, "n_heads": 2, "n_kv_heads": 1, "head_dim": 16,
         "ffn_dim": 64, "vocab_size": 96, "tied_embeddings": False, "dtype": "fp32"}


def test_model_mode_with_run_dir(tmp_path, capsys):
    shape = tmp_path / "shape.json"
    shape.write_text(json.dumps({"model": SHAPE}))
    run = tmp_path / "run"
    run.mkdir()
    t0 = 10**12
    recs = [{"status": "ok", "phase": "measured",
             "chunks": [[t0, 0], [t0 + 5_000_000, 1], [t0 + 15_000_000, 1], [t0 + 35_000_000, 2]]},
            {"status": "error", "phase": "measured", "chunks": []}]
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert kernel_decode.measured_tpot_ms(run)[0] == pytest.approx(10.0)   # 30 ms / 3 tokens
    j = tmp_path / "m.json"
    rc = cmd.main(_args("--model", str(shape), "--batch", "2", "--warmup", "1", "--repeats", "3",
                        "--run", str(run), "--json", str(j), "--spec", "h200"))
    assert rc == 0
    st = json.loads(j.read_text())["decode_study"]
    assert [g["count"] for g in st["gemvs"]] == [2, 2, 2, 2, 1]     # qkv, o, gate_up, down, lm_head
    assert st["gemvs"][-1]["N"] == 96 and st["gemvs"][0]["M"] == 2
    assert all(g["passed"] for g in st["gemvs"])
    assert st["engine_step_ms"] == pytest.approx(10.0)
    assert st["gap_ms"] == pytest.approx(10.0 - st["measured_gemv_ms"])
    assert st["predicted_gemv_ms"] > 0
    assert "gap" in capsys.readouterr().out


def test_summary_tpot_fallback(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"metrics": {"tpot_ms": {"p50": 7.5}}}))
    assert kernel_decode.measured_tpot_ms(tmp_path)[0] == 7.5
    assert kernel_decode.measured_tpot_ms(tmp_path / "nope")[0] is None


def test_presets_shape_and_param_count_agree():
    from analysis.roofline import model_cost
    for name in ("tiny", "small", "llama-3.2-1b"):
        shape = cmd.load_shape(name, "fp32")
        assert shape["dtype_bytes"] == 4
        assert model_cost.param_count({k: v for k, v in shape.items() if k != "n_params"}) \
            == shape["n_params"], name


def test_model_mode_bad_preset(capsys):
    assert cmd.main(_args("--model", "no-such-preset")) == 2
    assert "--model" in capsys.readouterr().err
