"""Benchmark (not a test): the calibrated forecast against a measured sweep, point by point.

    servers.jax (preset small, managed by loadgen) ─► loadgen.multirun.predict.Predictor(calibrate):
        ≤ 60 s of probes (kept run directories) ─► fitted overheads ─► forecast per point
    ─► loadgen.multirun.sweep.run_sweep(predictor=...) ─► measured points, each summary.json with its
       "forecast" and error ─► a table of forecast vs measured and the error per figure, then one
       JSON line {"rows", "fit", "pass", "load_average", ...}
Pass (issue 40): |error| ≤ 15 % on TPOT p50 and output throughput at every point of a concurrency
sweep; ≤ 25 % on TTFT p50 for a Poisson rate sweep (--param rate, rates up to 80 % of the
measured max rate). The "probe vs sweep" lines say how far a probe and the sweep point of its
concurrency disagree: beyond the bar, the check says more about the host than the forecast. Do not run it beside other CPU-heavy work: the load average is printed
because a busy host moves every figure.

    python -m bench.predict_vs_measured [--preset small] [--param concurrency|rate]
                                        [--values 1,2,4,8,16] [--requests 16] [--prompt 64]
                                        [--output 32] [--device NAME|PATH|calibrate] [--out DIR]
                                        [--one-server [--rounds R]] [--rate-fractions F,...]
        --one-server: the probes run on the sweep's own managed server, just before its points
        (by default they start and stop a server of their own: a second process, compiled
        again, whose speed can differ from the sweep's)
        --rounds R (with --one-server; default 1): R rounds on that one server, each its probes
        then the points, in the given order on odd rounds and reversed on even ones
        (loadgen.multirun.predict_rounds); round r's forecast is fitted to round r's probes only;
        the table shows per point each round's error, the median and the spread (min..max), and
        a verdict line per point: the median against the bar (analysis.predict.rounds)
        --param rate with --one-server: the rates are --rate-fractions (default 0.2,0.4,0.6,0.8)
        of each round's measured max rate, the request throughput of its highest-concurrency
        probe (concurrency = the slots: the engine saturated), unless --values gives rates;
        only rates up to 80 % of the measured max rate are judged (also without --one-server,
        against its probes' max rate)
    python -m bench.predict_vs_measured --offline PROBE_DIR... --measured SWEEP_DIR
        a refit of kept runs, no server and no load: fit the probe run directories again
        (loadgen.multirun.predict_offline), forecast the kept sweep's points, same table; plus
        the drift between a probe and the sweep point of the same concurrency (measured / measured
        − 1: how far the two runs of one load point disagree, the noise the forecast sits on)
vLLM: this bench drives the built-in JAX engine only (vLLM is not installed here); point
--target-url at a running vLLM (with --model-config its config.json) to do the same by hand.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

FIGS = (("tpot_ms_p50", "TPOT p50 ms", 0.15), ("output_throughput", "out tok/s", 0.15),
        ("ttft_ms_p50", "TTFT p50 ms", 0.25), ("interactivity_tok_s_p50", "tok/s/user", None))


def scenario_tree(a) -> dict:
    param = f"load.{a.param}"
    values = [float(v) if a.param == "rate" else int(v) for v in values_of(a).split(",")]
    load = ({"mode": "concurrency", "concurrency": 1} if a.param == "concurrency"
            else {"mode": "server", "rate": values[0], "arrival": "poisson"})
    target = ({"url": a.target_url} if a.target_url else
              {"server": {"kind": "jax", "preset": a.preset, "startup_timeout_s": 900}})
    return {"name": f"predict-vs-measured-{a.preset}-{a.param}", "target": target,
            "api": {"endpoint": "completions", "stream": True},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": a.prompt},
                         "output_tokens": {"dist": "fixed", "value": a.output}},
            "load": {**load, "num_requests": a.requests, "warmup_requests": 2},
            "sweep": {"param": param, "values": values},
            "output": {"dir": str(a.out), "run_name": f"predict-vs-measured-{int(time.time())}",
                       "report": "text"}}


def values_of(a) -> str:
    """--values, else the default points: concurrency 1..16; a rate sweep's --rate-fractions
    (placeholders until a round's max rate is measured)."""
    if a.values:
        return a.values
    return "1,2,4,8,16" if a.param == "concurrency" else a.rate_fractions


def fractions_of(a) -> list[float] | None:
    """A rate sweep's points as fractions of the measured max rate (no --values given)."""
    if a.param != "rate" or a.values:
        return None
    return [float(v) for v in a.rate_fractions.split(",")]


def table(rows: list[dict]) -> str:
    head = ["point"] + [f"{lab} fc/meas (err)" for _, lab, _ in FIGS]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        cells = [f"{r['param'].split('.')[-1]}={r['value']:g}"]
        for k, _, _ in FIGS:
            e = r["error"][k]
            cells.append("n/a" if e["rel_error"] is None else
                         f"{e['forecast']:.4g} / {e['measured']:.4g} ({e['rel_error'] * 100:+.1f} %)")
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def verdict(rows: list[dict], param: str, rate_max: float | None = None) -> dict:
    """The bar on every row; a rate sweep's rows only up to 80 % of ``rate_max``."""
    from analysis.predict.rounds import judged
    keys = ("tpot_ms_p50", "output_throughput") if param == "concurrency" else ("ttft_ms_p50",)
    if param == "rate" and rate_max:
        rows = [r for r in rows if judged("rate", [r["value"]], [rate_max])[0]]
    out = {}
    for k, _, tol in FIGS:
        if k not in keys:
            continue
        errs = [r["error"][k]["rel_error"] for r in rows]
        out[k] = {"tolerance": tol, "max_abs_error": max((abs(e) for e in errs if e is not None),
                                                         default=None),
                  "pass": all(e is not None and abs(e) <= tol for e in errs)}
    return out


def drift(probes: list[dict], sweep_dir: Path) -> list[dict]:
    """Probe vs sweep point at the same concurrency: measured / measured − 1 per figure."""
    from analysis.predict.forecast import measured
    from loadgen.multirun.predict_offline import read_json
    from loadgen.scenario.model import ScenarioError
    try:
        pts = {int(p["value"]): p["run_dir"]
               for p in read_json(Path(sweep_dir) / "sweep.json").get("points") or []}
    except ScenarioError:
        return []
    out = []
    for pr in probes:
        c = pr["point"].concurrency
        if c not in pts or not pr.get("measured"):
            continue
        try:
            s = read_json(Path(sweep_dir) / pts[c] / "summary.json")
        except ScenarioError:
            continue
        row = {"concurrency": c}
        for k, _, _ in FIGS[:3]:
            a, b = pr["measured"].get(k), measured(s, k)
            row[k] = a / b - 1.0 if a and b else None
        out.append(row)
    return out


def print_drift(probes: list[dict], sweep_dir: Path) -> list[dict]:
    rows = drift(probes, sweep_dir)
    for d in rows:
        print(f"probe vs sweep, concurrency {d['concurrency']}: " + ", ".join(
            f"{lab} {d[k] * 100:+.1f} %" for k, lab, _ in FIGS[:3] if d[k] is not None))
    return rows


def offline(a) -> int:
    from loadgen.multirun.predict_offline import bound_check, refit
    pred, rows = refit(a.offline, a.measured)
    print(table(rows))
    dr = print_drift(pred.probes, a.measured)
    beaten = bound_check(a.measured, pred.device)
    for b in beaten:
        print(f"spec-only bound beaten at {rows[0]['param'].split('.')[-1]}={b['value']:g}: "
              f"{b['figure']} forecast {b['forecast']:.4g}, measured {b['measured']:.4g}")
    if not beaten:
        print("spec-only bound: held at every point")
    v = verdict(rows, "concurrency" if rows and rows[0]["param"] == "load.concurrency" else "rate")
    v["spec_only_bound"] = {"beaten": len(beaten), "pass": not beaten}
    print(json.dumps({"bench": "predict_vs_measured", "mode": "offline refit of kept runs",
                      "probes": [str(p) for p in a.offline], "sweep_dir": str(a.measured),
                      "fit": pred.fit, "rows": rows, "pass": v, "drift": dr,
                      "spec_only_beaten": beaten}, default=str))
    return 0 if all(x["pass"] for x in v.values()) else 1


def one_server(sc, a):
    """--one-server: the probes run on the sweep's own managed server, just before its points
    (one process, one warm-up), instead of on a server of their own."""
    from loadgen.multirun.predict import Predictor
    from loadgen.multirun.sweep import Sweep
    sw = Sweep(sc)
    sw.dir.mkdir(parents=True, exist_ok=True)
    managed = sw._server()                      # started now; the sweep stops it at its end
    try:
        sw.predictor = Predictor(sw.sc, a.device, calibrate=True, model_config=a.model_config,
                                 managed=managed)
    except BaseException:
        managed.stop()
        raise
    return sw.dir, sw.run(), sw.predictor


def rounds_mode(a) -> int:
    """--one-server --rounds R (or a rate sweep on one server): every round's table and drift,
    then the rounds brought together: per point each round's error, median, spread, verdict."""
    from analysis.predict import rounds as agg
    from loadgen.multirun.predict import device_of
    from loadgen.multirun.predict_rounds import run_rounds
    load0 = os.getloadavg()
    done = run_rounds(scenario_tree(a), a.rounds, device_of(a.device), a.model_config,
                      fractions_of(a))
    for rd in done:
        top = "n/a" if rd["max_rate"] is None else f"{rd['max_rate']:.4g} req/s"
        order = ", ".join(f"{v:g}" for v in rd["order"])
        print(f"round {rd['round']}: points in the order {order}; max rate (highest-concurrency "
              f"probe) {top}; {rd['sweep_dir']}")
        print(table(rd["rows"]))
        rd["drift"] = print_drift(rd["probes"], rd["sweep_dir"]) if a.param == "concurrency" else []
    points = agg.aggregate([rd["rows"] for rd in done], a.param, [rd["max_rate"] for rd in done])
    print(agg.rounds_table(points, a.param, len(done)))
    ok = agg.passed(points)
    print(json.dumps({"bench": "predict_vs_measured", "mode": f"one server, {len(done)} rounds",
                      "preset": a.preset, "param": a.param, "points": points, "pass": ok,
                      "rounds": [{k: v for k, v in rd.items() if k != "probes"} for rd in done],
                      "load_average": {"start": load0, "end": os.getloadavg()},
                      "engine": "servers.jax" if not a.target_url else a.target_url},
                     default=str))
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--param", choices=("concurrency", "rate"), default="concurrency")
    ap.add_argument("--values", default=None,
                    help="the points (default concurrency 1,2,4,8,16; rate: --rate-fractions)")
    ap.add_argument("--rate-fractions", default="0.2,0.4,0.6,0.8",
                    help="--param rate without --values: the rates as fractions of the measured "
                         "max rate (--one-server: each round's own)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="with --one-server: rounds of probes then points, the order reversed "
                         "every other round (default 1)")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--output", type=int, default=32)
    ap.add_argument("--device", default=None)
    ap.add_argument("--model-config", default=None)
    ap.add_argument("--target-url", default=None)
    ap.add_argument("--out", type=Path, default=Path("runs"))
    ap.add_argument("--one-server", action="store_true",
                    help="run the probes on the sweep's own server, just before its points "
                         "(default: the probes start a server of their own)")
    ap.add_argument("--offline", nargs="+", type=Path, default=None, metavar="PROBE_DIR",
                    help="refit these kept probe run directories (no server, no load)")
    ap.add_argument("--measured", type=Path, default=None, metavar="SWEEP_DIR",
                    help="with --offline: the kept sweep directory to check the forecast against")
    a = ap.parse_args(argv)
    if a.offline is not None or a.measured is not None:
        if not (a.offline and a.measured):
            ap.error("--offline PROBE_DIR... and --measured SWEEP_DIR go together")
        from loadgen.scenario.model import ScenarioError
        try:
            return offline(a)
        except ScenarioError as e:
            print(f"predict_vs_measured: {e}", file=sys.stderr)
            return 2
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    for flag, text in (("--values", a.values), ("--rate-fractions", a.rate_fractions)):
        try:
            bad = text is not None and any(float(v) <= 0 for v in text.split(","))
        except ValueError:
            bad = True
        if bad:
            ap.error(f"{flag}: a comma list of positive numbers, not {text!r}")
    if a.rounds > 1 and not a.one_server:
        ap.error("--rounds needs --one-server (the rounds share one server)")
    from loadgen.scenario.model import ScenarioError
    if a.one_server and (a.rounds > 1 or a.param == "rate"):
        try:
            return rounds_mode(a)
        except ScenarioError as e:
            print(f"predict_vs_measured: {e}", file=sys.stderr)
            return 2
    if fractions_of(a):
        ap.error("--param rate needs --values (rates) without --one-server: the max rate is "
                 "measured per round only with --one-server")
    from analysis.predict.rounds import max_rate
    from loadgen.multirun.predict import Predictor
    from loadgen.multirun.sweep import run_sweep
    from loadgen.scenario.loader import scenario_from_dict
    sc = scenario_from_dict(scenario_tree(a))
    load0 = os.getloadavg()
    if a.one_server and sc.target.server is not None:
        d, res, pred = one_server(sc, a)
    else:
        pred = Predictor(sc, a.device, calibrate=True, model_config=a.model_config)
        d, res = run_sweep(sc, predictor=pred)
    rows = [{"param": res["param"], "value": p["value"], "run_dir": p["run_dir"],
             "error": p["forecast"]["error"]} for p in res["points"] if p.get("forecast")]
    print(table(rows))
    dr = print_drift(pred.probes, d) if a.param == "concurrency" else []
    v = verdict(rows, a.param, max_rate(pred.probes))
    print(json.dumps({"bench": "predict_vs_measured", "preset": a.preset, "param": a.param,
                      "sweep_dir": str(d), "fit": pred.fit, "rows": rows, "pass": v,
                      "drift": dr,
                      "load_average": {"start": load0, "end": os.getloadavg()},
                      "engine": "servers.jax" if not a.target_url else a.target_url},
                     default=str))
    return 0 if all(x["pass"] for x in v.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
