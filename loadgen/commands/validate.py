"""``loadgen validate SCENARIO [--set k.path=v ...] [--json]`` (= ``loadgen run --dry-run``):
the plan of a run, without running it.

    SCENARIO + --set ─► scenario.load_scenario (every field checked: one line, exit 2)
        ─► workload.build_workload (files, tokenizer, trace: checked the same way)
        ─► plan(): the target (and whether loadgen would start a server), the load mode,
           requests / duration, rate or concurrency, the sweep, the prompt / output lengths of
           the first requests the workload would send (at most SAMPLE, drawn as a run draws them)
        ─► stdout: the plan, then the resolved scenario as scenario.yaml would hold it
           (rundir.resolved_yaml: secrets [REDACTED]); --json: one JSON object
Nothing is started, sent or written; exit 0.
"""
from __future__ import annotations

import argparse
import itertools
import json
from typing import Optional

from loadgen.commands.scenario_args import add_scenario_args
from loadgen.commands import subcommand

SAMPLE = 200        # requests drawn for the length summary (a run draws the same ones first)


def register(subparsers) -> None:
    p = subcommand(subparsers, "validate", main)
    add_scenario_args(p, scenario_help="scenario YAML file (see scenarios/)",
                      set_help="override one scenario field, e.g. --set load.rate=4 (repeatable)",
                      json_help="print the plan as one JSON object")


def _target(sc) -> dict:
    t, s = sc.target, sc.target.server
    if s is not None:
        what = {"jax": f"preset {s.preset}" if not s.model else f"model {s.model}",
                "vllm": f"model {s.model}", "command": " ".join(s.command or [])}[s.kind]
        return {"starts_server": True, "kind": s.kind, "url": None,
                "text": f"managed {s.kind} server ({what}): loadgen would start and stop it"}
    urls = t.replica_urls or [t.url]
    return {"starts_server": False, "kind": "external", "url": urls[0], "urls": urls,
            "text": f"{', '.join(urls)} (external: no server started; it must be running)"}


def _load(sc) -> dict:
    from loadgen.scenario.limits import planned_count
    ld = sc.load
    size = []
    if ld.num_requests is not None:
        size.append(f"{ld.num_requests:,} measured requests")
    if ld.duration_s is not None:
        size.append(f"for at most {ld.duration_s:g} s")
    if not size:
        size.append(ld.whole)
    if ld.warmup_requests:
        size.append(f"+ {ld.warmup_requests} warm-up")
    planned = planned_count(ld)
    return {"mode": ld.mode, "rate": ld.rate, "concurrency": ld.concurrency,
            "num_requests": ld.num_requests, "duration_s": ld.duration_s,
            "warmup_requests": ld.warmup_requests, "planned_requests": int(planned) or None,
            "text": f"mode {ld.mode}: {ld.how}; {' '.join(size)}"}


def _lengths(values: list) -> Optional[dict]:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"min": min(vals), "mean": round(sum(vals) / len(vals), 1), "max": max(vals)}


def _workload(sc, planned: Optional[int]) -> dict:
    from loadgen.scenario.workload import build_workload
    w = sc.workload
    wp = build_workload(w)                      # files, tokenizer, trace: checked here
    n = min(planned or SAMPLE, SAMPLE)
    specs = list(itertools.islice(iter(wp), n))
    prompt = _lengths([s.prompt_tokens for s in specs])
    out = _lengths([s.max_tokens for s in specs])

    def fmt(d: Optional[dict], what: str) -> str:
        if d is None:
            return f"{what} n/a"
        return (f"{what} {d['min']}" if d["min"] == d["max"] else
                f"{what} {d['min']}–{d['max']} (mean {d['mean']:g})")
    src = w.source + (f" {w.path}" if w.path else "")
    return {"source": w.source, "path": w.path, "tokenizer": wp.counter.label,
            "sampled": len(specs), "prompt_tokens": prompt, "output_tokens": out,
            "text": f"{src}, tokenizer {wp.counter.label} ({wp.token_count} counts); "
                    f"{fmt(prompt, 'prompt tokens')}, {fmt(out, 'output tokens')} "
                    f"(the first {len(specs)} requests)"}


def _sweep(sc) -> Optional[dict]:
    sw = sc.sweep
    if sw is None:
        return None
    text = (f"search {sw.search}" if sw.search else
            f"{sw.param} over {', '.join(f'{v:g}' for v in sw.values)}")
    return {"param": sw.param, "values": list(sw.values), "search": sw.search,
            "text": f"{text} (loadgen sweep runs one measured run per point)"}


def plan(sc) -> dict:
    """The plan of a run of ``sc`` (a resolved Scenario): what would run, against what."""
    import yaml
    from loadgen.run.rundir import resolved_yaml
    load = _load(sc)
    a = sc.api
    return {"scenario": {"name": sc.name, "description": sc.description},
            "target": _target(sc), "load": load,
            "workload": _workload(sc, load["planned_requests"]),
            "api": {"endpoint": a.endpoint, "stream": a.stream, "model": a.first_model,
                    "text": f"endpoint {a.endpoint}, stream {str(a.stream).lower()}, model "
                            f"{a.first_model or '(the first /v1/models lists)'}"},
            "sweep": _sweep(sc), "resolved": yaml.safe_load(resolved_yaml(sc))}


def show(args: argparse.Namespace) -> int:
    """Print the plan of ``args.scenario`` + ``args.overrides`` (also ``run --dry-run``)."""
    from loadgen.scenario.loader import load_scenario
    from loadgen.run.rundir import resolved_yaml
    sc = load_scenario(args.scenario, list(args.overrides))
    p = plan(sc)
    if args.json:
        print(json.dumps(p, default=str))
        return 0
    lines = [f"scenario: {sc.name}" + (f" — {sc.description}" if sc.description else ""),
             f"target:   {p['target']['text']}",
             f"load:     {p['load']['text']}",
             f"workload: {p['workload']['text']}",
             f"api:      {p['api']['text']}"]
    if p["sweep"]:
        lines.append(f"sweep:    {p['sweep']['text']}")
    lines.append("resolved scenario:")
    lines += ["  " + ln for ln in resolved_yaml(sc).rstrip("\n").splitlines()]
    sets = "".join(f" --set {o}" for o in args.overrides)
    lines.append(f"valid: nothing was sent (to run it: loadgen run {args.scenario}{sets})")
    print("\n".join(lines))
    return 0


def main(args: argparse.Namespace) -> int:
    return show(args)
