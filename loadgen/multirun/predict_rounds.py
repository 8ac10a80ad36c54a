"""Rounds of calibration probes and sweep points on ONE server, each round's forecast fitted to
that round's probes only (``python -m bench.predict_vs_measured --one-server --rounds R``).

    the bench's scenario tree + R (+ rate fractions) ─► one target.server started in
        <output.dir>/<run_name>/ (a --target-url server: used as it is), stopped after the last
    round r = 1..R:
        run_probes (concurrency 1, ~slots/2, the slots; on that server; kept run directories)
        ─► Predictor(the round's scenario, probes=...)   fitted to this round's probes only
        ─► the round's points: concurrency: analysis.predict.rounds.round_order(values, r)
           (as given on odd rounds, reversed on even); rate: the fractions × this round's
           measured max rate (max_rate: its highest-concurrency probe's request throughput),
           in the same alternating order; or the --values rates as given
        ─► Sweep(<output.dir>/<run_name>/round-<r>/, those values in that order, the shared
           server — its stop() at the sweep's end does nothing — and the round's predictor)
    ─► [{"round", "order", "sweep_dir", "rows": [{param, point, value, run_dir, error}],
         "fit", "probes", "max_rate"}]  ─► analysis.predict.rounds.aggregate (the bench)

The server is never fitted to the sweep: a point's forecast comes from the probes run minutes
before it, on the same process. ScenarioError (one line) when a rate round measured no max rate.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable, Optional, Sequence

from analysis.predict.rounds import max_rate, rate_values, round_order
from loadgen.multirun.predict import (PROBE_BUDGET_S, Predictor, load_points, probe_concurrencies,
                                      shape_of)
from loadgen.multirun.predict_probe import run_probes
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import Scenario, ScenarioError


class Shared:
    """The one server of every round: a sweep's stop() at its end leaves it running."""

    def __init__(self, server):
        self.server = server

    def stop(self) -> None:
        pass

    def __getattr__(self, name):
        if name == "server":            # not set yet (a copy): no recursion
            raise AttributeError(name)
        return getattr(self.server, name)


def round_scenario(tree: dict, r: int, values: Sequence[float]) -> Scenario:
    """Round ``r``'s sweep: ``values`` in that order, in <output.dir>/<run_name>/round-<r>."""
    t = copy.deepcopy(tree)
    t["sweep"] = {**t["sweep"], "values": list(values)}
    if t["sweep"]["param"] == "load.rate":
        t["load"]["rate"] = float(values[0])
    t["output"] = {**t["output"], "dir": str(base_dir(tree)), "run_name": f"round-{r}"}
    return scenario_from_dict(t)


def base_dir(tree: dict) -> Path:
    return Path(tree["output"]["dir"]) / str(tree["output"]["run_name"])


def _start(sc: Scenario, where: Path):
    from loadgen.run.server_traces import shared_spec
    from loadgen.targets.managed import ManagedServer
    where.mkdir(parents=True, exist_ok=True)
    return ManagedServer(shared_spec(sc), where).start()


def _sweep(sc: Scenario, predictor, server) -> tuple[Path, dict]:
    from loadgen.multirun.sweep import Sweep
    sw = Sweep(sc, predictor=predictor)
    sw.managed = Shared(server) if server is not None else None
    return sw.dir, sw.run()


def run_rounds(tree: dict, rounds: int, device: dict, model_config: Optional[str] = None,
               fractions: Optional[Sequence[float]] = None,
               start: Callable = _start, probes_fn: Callable = run_probes,
               sweep_fn: Callable = _sweep) -> list[dict]:
    """Every round (module docstring); ``device``: device_of()'s dict, the same spec for every
    round; ``fractions``: a rate sweep's points as fractions of each round's max rate (else
    sweep.values as given). ``start``, ``probes_fn``, ``sweep_fn``: the server, the probes and
    the sweep (tests pass fakes)."""
    if rounds < 1:
        raise ScenarioError(f"--rounds must be at least 1, not {rounds}")
    from loadgen.run.server_traces import for_shared_server
    sc0 = for_shared_server(round_scenario(tree, 1, tree["sweep"]["values"]))
    tree = {**sc0.model_dump(mode="json"), "output": tree["output"]}    # a traces port, pinned
    param = tree["sweep"]["param"]
    shape = shape_of(sc0, device, model_config)
    concs = probe_concurrencies(shape.get("slots"), load_points(sc0))
    server = start(sc0, base_dir(tree)) if sc0.target.server is not None else None
    out = []
    try:
        for r in range(1, rounds + 1):
            sc = round_scenario(tree, r, tree["sweep"]["values"])
            probes = probes_fn(sc, concs, PROBE_BUDGET_S, None, server)
            top = max_rate(probes)
            ids = list(tree["sweep"]["values"])
            values = ids
            if fractions:
                if not top:
                    raise ScenarioError(f"--rate-fractions: round {r}: no probe measured a "
                                        "request throughput, so there is no max rate")
                ids, values = list(fractions), rate_values(top, fractions)
            of = dict(zip(values, ids))
            order = round_order(values, r)
            sc = round_scenario(tree, r, order)
            pred = Predictor(sc, device, model_config=model_config, probes=probes)
            d, res = sweep_fn(sc, pred, server)
            rows = [{"param": res.get("param", param), "point": of.get(p["value"], p["value"]),
                     "value": p["value"], "run_dir": p["run_dir"],
                     "error": p["forecast"]["error"]}
                    for p in res.get("points") or [] if p.get("forecast")]
            out.append({"round": r, "order": order, "sweep_dir": str(d), "rows": rows,
                        "fit": pred.fit, "probes": probes, "max_rate": top})
    finally:
        if server is not None:
            server.stop()
    return out
