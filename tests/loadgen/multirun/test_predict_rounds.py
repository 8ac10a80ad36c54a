"""loadgen.multirun.predict_rounds and ``bench.predict_vs_measured --one-server --rounds`` with
fakes (no server, no load, no fit): one server for every round, probes then points in an order
that alternates, each round fitted to its own probes, a rate sweep's points from its max rate."""
from types import SimpleNamespace

import pytest

import bench.predict_vs_measured as bench
import loadgen.multirun.predict_rounds as pr
from analysis.predict.simulate import LoadPoint
from loadgen.scenario.model import ScenarioError

NO_DEVICE = {"spec": None, "how": "test", "what_if": False, "name": None}


def args(tmp_path, **kw):
    base = dict(preset="tiny", param="concurrency", values=None, rate_fractions="0.2,0.4,0.6,0.8",
                requests=4, prompt=8, output=4, target_url=None, out=tmp_path, rounds=2,
                device=None, model_config=None, one_server=True)
    return SimpleNamespace(**{**base, **kw})


class Server:
    def __init__(self):
        self.stopped, self.base_url = 0, "http://127.0.0.1:1"

    def stop(self):
        self.stopped += 1


class FakePredictor:
    def __init__(self, sc, device, model_config=None, probes=None):
        self.fit = {"fitted_to": [p["run_dir"] for p in probes]}


class Fakes:
    """The probes (request throughput rt[r] at the slots in round r) and the sweeps."""

    def __init__(self, rt=(1.4, 1.2, 1.3)):
        self.rt, self.calls, self.round = list(rt), [], 0

    def probes(self, sc, concs, budget, runner, managed):
        self.round += 1
        self.calls.append(("probes", self.round, tuple(concs), managed))
        return [{"point": LoadPoint("closed", concurrency=c), "run_dir": f"r{self.round}-c{c}",
                 "requests": 8, "measured": {"tpot_ms_p50": 10.0},
                 "request_throughput": self.rt[self.round - 1] * c / max(concs)} for c in concs]

    def sweep(self, sc, pred, server):
        vals = list(sc.sweep.values)
        self.calls.append(("sweep", self.round, vals, server, pred.fit["fitted_to"][0]))
        pts = [{"value": v, "run_dir": f"p-{v:g}", "forecast": {"error": {
            "tpot_ms_p50": {"rel_error": 0.01 * self.round}}}} for v in sorted(vals)]
        return f"{sc.output.dir}/{sc.output.run_name}", {"param": sc.sweep.param, "points": pts}


@pytest.fixture
def fakes(monkeypatch):
    monkeypatch.setattr(pr, "Predictor", FakePredictor)
    return Fakes()


def test_rounds_share_one_server_and_alternate_the_order(tmp_path, fakes):
    srv = Server()
    done = pr.run_rounds(bench.scenario_tree(args(tmp_path)), 3, NO_DEVICE,
                         start=lambda sc, d: srv, probes_fn=fakes.probes, sweep_fn=fakes.sweep)
    kinds = [(c[0], c[1]) for c in fakes.calls]
    assert kinds == [("probes", 1), ("sweep", 1), ("probes", 2), ("sweep", 2), ("probes", 3),
                     ("sweep", 3)]
    sweeps = [c for c in fakes.calls if c[0] == "sweep"]
    assert [c[2] for c in sweeps] == [[1, 2, 4, 8, 16], [16, 8, 4, 2, 1], [1, 2, 4, 8, 16]]
    assert all(c[3] is srv for c in fakes.calls)             # probes and points: one server
    assert [c[4] for c in sweeps] == ["r1-c1", "r2-c1", "r3-c1"]   # round r: its own probes
    assert srv.stopped == 1                                  # once, after the last round
    assert [d["order"] for d in done][1] == [16, 8, 4, 2, 1]
    assert done[1]["rows"][0] == {"param": "load.concurrency", "point": 1.0, "value": 1.0,
                                  "run_dir": "p-1", "error": {"tpot_ms_p50": {"rel_error": 0.02}}}
    assert done[0]["sweep_dir"].endswith("round-1")


def test_a_rate_rounds_points_are_fractions_of_its_own_max_rate(tmp_path, fakes):
    srv = Server()
    a = args(tmp_path, param="rate")
    done = pr.run_rounds(bench.scenario_tree(a), 2, NO_DEVICE, fractions=[0.2, 0.8],
                         start=lambda sc, d: srv, probes_fn=fakes.probes, sweep_fn=fakes.sweep)
    assert [d["max_rate"] for d in done] == [1.4, 1.2]       # the highest-concurrency probe's
    assert [d["order"] for d in done] == [[0.28, 1.12], [0.96, 0.24]]
    assert [(r["point"], r["value"]) for r in done[1]["rows"]] == [(0.2, 0.24), (0.8, 0.96)]
    fakes.rt = [None]
    fakes.round = 0
    with pytest.raises(ScenarioError, match="round 1: no probe measured"):
        pr.run_rounds(bench.scenario_tree(a), 1, NO_DEVICE, fractions=[0.5],
                      start=lambda sc, d: srv, probes_fn=lambda *x: [], sweep_fn=fakes.sweep)
    assert srv.stopped == 2                                  # stopped after a failed round too


def test_the_shared_server_ignores_a_sweeps_stop():
    srv = Server()
    shared = pr.Shared(srv)
    shared.stop()
    assert srv.stopped == 0 and shared.base_url == srv.base_url


def test_bench_rounds_prints_every_round_and_a_verdict_per_point(tmp_path, monkeypatch, capsys):
    import loadgen.multirun.predict_rounds as mod
    row = lambda v, e: {"param": "load.concurrency", "point": v, "value": v, "run_dir": "x",  # noqa: E731
                        "error": {k: {"forecast": 1.0, "measured": 1.0, "rel_error": e}
                                  for k, _, _ in bench.FIGS}}
    done = [{"round": 1, "order": [1, 2], "sweep_dir": str(tmp_path), "fit": {}, "probes": [],
             "max_rate": 1.0, "rows": [row(1, 0.05), row(2, 0.20)]},
            {"round": 2, "order": [2, 1], "sweep_dir": str(tmp_path), "fit": {}, "probes": [],
             "max_rate": 1.1, "rows": [row(2, 0.02), row(1, -0.02)]}]
    monkeypatch.setattr(mod, "run_rounds", lambda *a, **k: done)
    monkeypatch.setattr(bench, "print_drift", lambda probes, d: [])
    rc = bench.main(["--one-server", "--rounds", "2", "--values", "1,2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "round 2: points in the order 2, 1" in out
    assert "verdict concurrency=1: within the bar" in out          # median +1.5 %
    assert "verdict concurrency=2: within the bar" in out          # +20 % once, median +11 %
    assert "concurrency=2 | TPOT p50 | +20.0 % | +2.0 % | +11.0 % | +2.0 % .. +20.0 %" in out
    assert rc == 0
    done[0]["rows"][1] = row(2, 0.30)                              # median +16 %: not within
    assert bench.main(["--one-server", "--rounds", "2", "--values", "1,2"]) == 1
    assert "verdict concurrency=2: NOT within the bar" in capsys.readouterr().out


def test_bench_flags_that_do_not_go_together_exit_2(capsys):
    for argv in (["--rounds", "2"], ["--rounds", "0", "--one-server"], ["--values", "1,x"],
                 ["--one-server", "--param", "rate", "--rate-fractions", "0.5,-1"],
                 ["--param", "rate"]):
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2
    assert "--param rate needs --values" in capsys.readouterr().err


def test_a_real_sweep_runs_the_rounds_order_on_the_shared_server(tmp_path, monkeypatch):
    """pr._sweep with loadgen's Sweep (its points faked): the values in the round's order, every
    point on the server handed in, which the sweep's end does not stop."""
    import loadgen.multirun.sweep as sweep_mod
    seen, srv = [], Server()

    def point(sc, live=False, server=None, label=None, exporter=None):
        seen.append((sc.load.concurrency, server.server if server else None))
        return {"requests_completed": 1}
    monkeypatch.setattr(sweep_mod, "_run_point", point)
    tree = bench.scenario_tree(args(tmp_path))
    tree["output"]["report"] = "none"
    sc = pr.round_scenario(tree, 2, [4, 1, 2])
    d, res = pr._sweep(sc, None, srv)
    assert [c for c, _ in seen] == [4, 1, 2] and all(s is srv for _, s in seen)
    assert srv.stopped == 0 and str(d).endswith("round-2") and len(res["points"]) == 3
