"""loadgen.multirun.predict_offline and ``bench.predict_vs_measured --offline``: refit kept probe
run directories and check a kept sweep, with no server and no load (byte-fed, fast)."""
import json

import pytest
import yaml

from analysis.predict.engine_jax import JaxEngine
from analysis.predict.simulate import LoadPoint, simulate
from analysis.predict.step_model import Overheads, StepModel
from loadgen.multirun.predict import shape_of
from loadgen.multirun.predict_offline import probe_from_dir, refit
from loadgen.scenario.loader import scenario_from_dict

SPEC = {"name": "toy cpu", "scope": "1 chip",
        "peak": {"fp32": {"value": 1e11, "unit": "FLOP/s", "evidence": "measured",
                          "source": "test"}},
        "mem_bandwidth": {"value": 2e9, "unit": "B/s", "evidence": "measured", "source": "test"}}
TRUTH = Overheads(step_ms=0.5, per_seq_ms=0.5, prefill_ms=8.0, prefill_req_ms=4.0,
                  turnaround_ms=2.0, floor_scale=0.4)
N = 12


def tree(c: int) -> dict:
    return {"name": "offline-test", "target": {"server": {"kind": "jax", "preset": "tiny",
                                                          "slots": 4}},
            "api": {"endpoint": "completions", "stream": True},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 40},
                         "output_tokens": {"dist": "fixed", "value": 10}},
            "load": {"mode": "concurrency", "concurrency": c, "num_requests": N},
            "output": {"dir": "/nonexistent", "report": "none"}}


def run_dir(path, c: int, truth: Overheads):
    """A kept run directory: scenario.yaml, device.json and the summary ``truth`` simulates."""
    from analysis.roofline import devices
    path.mkdir(parents=True)
    sc = scenario_from_dict(tree(c))
    (path / "scenario.yaml").write_text(yaml.safe_dump(sc.model_dump(mode="json")))
    (path / "device.json").write_text(json.dumps({"status": "recorded", "spec": SPEC}))
    spec = devices.DeviceSpec.from_dict(SPEC)
    shape = shape_of(sc, {"spec": spec, "what_if": False})
    m = StepModel(shape, spec, truth, 4, 16, JaxEngine(16))
    s = simulate(m, [(40, 10)] * N, LoadPoint("closed", concurrency=c))
    (path / "summary.json").write_text(json.dumps({
        "requests_completed": N, "ttft_ms": {"p50": s["ttft_ms_p50"]},
        "tpot_ms": {"p50": s["tpot_ms_p50"]}, "output_throughput": s["output_throughput"],
        "interactivity_tok_s": {"p50": s["interactivity_tok_s_p50"]}}))
    return path


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    root = tmp_path_factory.mktemp("kept")
    probes = [run_dir(root / f"probe-concurrency-{c}", c, TRUTH) for c in (1, 2, 4)]
    sweep = root / "sweep"
    for c in (1, 2, 4, 8):
        run_dir(sweep / f"concurrency-{c}", c, TRUTH)
    (sweep / "sweep.json").write_text(json.dumps({
        "param": "load.concurrency",
        "points": [{"value": float(c), "run_dir": f"concurrency-{c}"} for c in (1, 2, 4, 8)]}))
    return probes, sweep


def test_a_probe_dir_reads_back_as_run_probes_returned_it(kept):
    p = probe_from_dir(kept[0][1])
    assert p["point"] == LoadPoint("closed", concurrency=2) and p["requests"] == N
    assert set(p["measured"]) == {"ttft_ms_p50", "tpot_ms_p50", "output_throughput"}


def test_refit_of_kept_probes_forecasts_the_kept_sweep(kept):
    """Probes and sweep from one engine: the refit finds it again (floor contradicted and
    labelled) and forecasts every sweep point, c=8 beyond the 4 slots included, to 1 %."""
    pred, rows = refit(*kept)
    assert pred.fit["floor"]["contradicted"] and pred.fit["rms_rel_error"] < 0.01
    assert [r["value"] for r in rows] == [1.0, 2.0, 4.0, 8.0]
    for r in rows:
        for k in ("tpot_ms_p50", "output_throughput", "ttft_ms_p50"):
            assert abs(r["error"][k]["rel_error"]) < 0.01, (r["value"], k)


def test_bench_offline_prints_the_table_the_drift_and_a_beaten_bound(kept, tmp_path, capsys):
    """The kept runs' engine is faster than the spec's floor (floor_scale 0.4): the forecast
    passes, the spec-only bound does not, and the bench says so (exit 1)."""
    from bench.predict_vs_measured import main
    probes, sweep = kept
    assert main(["--offline", *map(str, probes), "--measured", str(sweep)]) == 1
    out = capsys.readouterr().out
    assert "concurrency=8" in out and "probe vs sweep, concurrency 4: TPOT p50 ms +0.0 %" in out
    assert "spec-only bound beaten at concurrency=1: tpot_ms_p50" in out
    line = json.loads(out.strip().splitlines()[-1])
    assert line["pass"]["tpot_ms_p50"]["pass"] and line["pass"]["output_throughput"]["pass"]
    assert not line["pass"]["spec_only_bound"]["pass"]
    assert main(["--offline", str(tmp_path / "nope"), "--measured", str(sweep)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]
