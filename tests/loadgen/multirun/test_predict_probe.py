"""predict_probe.run_probes on a server handed in (the sweep's own: bench --one-server): the
probes use it and leave it running; the bench's wiring hands the sweep's server to the probes.
No server is started (fakes), fast."""
from types import SimpleNamespace

import pytest

import bench.predict_vs_measured as bench
import loadgen.multirun.predict as predict_mod
import loadgen.multirun.sweep as sweep_mod
from loadgen.multirun.predict_probe import run_probes
from loadgen.scenario.loader import scenario_from_dict


def scenario(tmp_path):
    return scenario_from_dict({
        "name": "probe-test", "target": {"server": {"kind": "jax", "preset": "tiny"}},
        "api": {"endpoint": "completions", "stream": True},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 4}},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 4},
        "sweep": {"param": "load.concurrency", "values": [1, 2]},
        "output": {"dir": str(tmp_path), "report": "none"}})


class Running:
    stopped = 0

    def stop(self):
        self.stopped += 1


def test_probes_use_a_server_handed_in_and_leave_it_running(tmp_path, monkeypatch):
    import loadgen.targets.managed as managed_mod
    monkeypatch.setattr(managed_mod, "ManagedServer",
                        lambda *a, **k: pytest.fail("started a server of its own"))
    srv, seen = Running(), []

    def runner(sc, server):
        seen.append((sc.load.concurrency, server))
        return SimpleNamespace(summary={"requests_completed": 2, "tpot_ms": {"p50": 10.0},
                                        "ttft_ms": {"p50": 30.0}, "output_throughput": 50.0},
                               run_dir=str(tmp_path / f"c{sc.load.concurrency}"))

    probes = run_probes(scenario(tmp_path), [1, 2], 2.0, runner, managed=srv)
    assert seen == [(1, srv), (2, srv)] and srv.stopped == 0
    assert [p["measured"]["tpot_ms_p50"] for p in probes] == [10.0, 10.0]


def test_bench_one_server_hands_the_sweeps_server_to_the_probes(tmp_path, monkeypatch):
    srv, got = Running(), {}
    monkeypatch.setattr(sweep_mod.Sweep, "_server", lambda self: srv)
    monkeypatch.setattr(sweep_mod.Sweep, "run", lambda self: {"points": []})

    def fake_predictor(sc, device, calibrate, model_config, managed):
        got["managed"] = managed
        return "predictor"

    monkeypatch.setattr(predict_mod, "Predictor", fake_predictor)
    a = SimpleNamespace(device=None, model_config=None)
    d, res, pred = bench.one_server(scenario(tmp_path), a)
    assert got["managed"] is srv and pred == "predictor" and res == {"points": []}
    assert srv.stopped == 0                     # the sweep stops it at its end, not the probes

    def failing(*_, **__):
        raise RuntimeError("probe failed")

    monkeypatch.setattr(predict_mod, "Predictor", failing)
    with pytest.raises(RuntimeError):
        bench.one_server(scenario(tmp_path), a)
    assert srv.stopped == 1                     # a failed probe does not leave it running
