"""Runs side by side, refused where a comparison would mislead.

    run dirs ─► conditions(run_dir): must-match (scenario type, workload, SLO) + other conditions
             ─► compare(dirs) ─► {"comparable", "refusals", "differences", "metrics" rows,
                                  "figures" (2nd vs 1st), "pairs" (each later run vs the 1st)}
             ─► blocks() ─► render.render_md / render_html;  regressions(result, PCT) ─► gate
             ─► "phases" (compare_phases.py): with the server's spans, the TTFT phase that moved

A repeat series (the parent of run-1/ … run-N/ that ``--repeat N`` writes) counts as one entry:
its table column is the mean over its runs, its noise test Welch's t on the run figures; two
single runs get bootstrap intervals (analysis.metrics.noise). Each later entry is tested
against the first: change, 95 % interval, "significant" or "within noise".

Must match (else refused, with every differing field named): the scenario type (load.mode:
offline / server / concurrency, whose numbers mean different things), the workload (source,
dataset file and its SHA-256, length distributions, tokenizer, shared prefix, seed) and the
resolved SLO limits (ttft/tpot/itl/e2el and percentile: they define goodput and the verdict).
A run whose must-match conditions are not recorded cannot be checked and is refused too.
Figures are recomputed from each run's records (summarize_run), never taken from summary.json:
where its summary.json says otherwise (an edit, a NaN), ``stale`` holds one line per figure. A
file that does not read: ContractError, one line naming RUN/FILE[:LINE] (analysis.contract.base
.reading).
Everything else that differs (model, server, device, load level, versions, ...) is listed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from analysis.contract import SCHEMA_VERSION, RunMeta, Summary, Sut, read_meta, read_sut
from analysis.contract.summary import Stats
from analysis.contract.summary_blocks import Energy, Slo
from analysis.contract.base import reading
from analysis.contract.rundir import records_path
from analysis.report import manifest as man_mod
from analysis.metrics import noise
from analysis.metrics import slo as slo_mod
from analysis.metrics import summary as summary_mod
from analysis.report.compare_phases import phase_blocks, phase_changes
from analysis.report.render import Block, fmt

SLO_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms", "percentile")
WORKLOAD_META_KEYS = ("source", "path", "tokenizer", "seed", "shared_prefix_tokens")


def flatten(tree: Any, prefix: str = "") -> dict:
    """{"a.b.c": leaf} of nested dicts (lists and scalars are leaves)."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict = {}
    for k, v in tree.items():
        out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def load_summary(run_dir: Path) -> dict:
    """The run's figures recomputed from its records (the source of truth), by the function
    that wrote summary.json (analysis.metrics.summary.summarize_run; a non-finite figure: None).
    summary.json is not trusted: stored_disagrees says where it differs."""
    with reading(run_dir):
        return summary_mod._finite(summary_mod.summarize_run(run_dir))


def stored_disagrees(run_dir: Path, fresh: dict | Summary) -> list[str]:
    """'RUN: summary.json says goodput (req/s) inf, its records give 0.567' per table figure
    where the run's summary.json (this contract version) differs from ``fresh`` (the records'
    figures); [] when it agrees or is absent. A summary.json that does not read: ContractError
    naming it (one line)."""
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        return []
    with reading(run_dir):
        stored = Summary.read_file(path)
    if stored.schema_version != SCHEMA_VERSION:      # an older writer: recomputed, not compared
        return []
    stored, fresh = Summary.read(stored.as_dict()), Summary.read(fresh)   # as the file holds it
    out = []
    for label, key in METRICS:
        if key is None:
            continue
        a, b = _value(stored, key), _value(fresh, key)
        if not _same(a, b):
            out.append(f"{run_dir}: summary.json says {_label(label, stored)} {_short(a)}, its "
                       f"records give {_short(b)}")
    return out


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    try:
        return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))
    except (TypeError, ValueError, OverflowError):
        return False


def _short(v) -> str:
    s = "null" if v is None else repr(v)
    return s if len(s) <= 24 else s[:12] + f"… ({len(s)} characters)"


def _typed(read, run_dir: Path) -> dict:
    """meta.json / sut.json through the contract's reader ({} when the file is absent)."""
    m = read(run_dir)
    return m.as_dict() if m is not None else {}


def repeat_runs(d: Path) -> list[Path]:
    """run-1/ … run-N/ (numeric order) of a repeat series' parent; [] for anything else."""
    if records_path(d).is_file():                 # records.jsonl, or records.arrow
        return []
    runs = [r for r in d.glob("run-*") if records_path(r).is_file()
            and r.name[4:].isdigit()]
    return sorted(runs, key=lambda r: int(r.name[4:]))


def _mean(values: list) -> Optional[float]:
    v = [x for x in values if isinstance(x, (int, float)) and not isinstance(x, bool)]
    return sum(v) / len(v) if v else None


def mean_summary(summaries: list[dict]) -> dict:
    """The table's view of a repeat series: each figure the mean over its runs, counts summed,
    VALID only if every run is."""
    out = dict(summaries[0])
    typed = [Summary.read(s) for s in summaries]
    for k in ("duration_s", "request_throughput", "output_throughput", "goodput"):
        out[k] = _mean([getattr(t, k) for t in typed])          # named fields: a typo raises
    for k in summary_mod.LATENCY_KEYS:
        dists = [getattr(t, k) or Stats() for t in typed]
        out[k] = {f: _mean([getattr(x, f) for x in dists]) for f in summary_mod.STAT_FIELDS}
    out["requests_completed"] = sum(t.requests_completed for t in typed)
    out["requests_failed"] = sum(t.requests_failed for t in typed)
    out["energy"] = {**(typed[0].energy.as_dict() if typed[0].energy else {}),   # the first's
                     "j_per_output_token": _mean([t.energy.j_per_output_token if t.energy
                                                  else None for t in typed])}
    out["verdict"] = {"valid": all(t.verdict and t.verdict.valid for t in typed)}
    return out


def _noise(a: Path, b: Path, ra: list[Path], rb: list[Path]) -> dict:
    """noise.compare_repeats for two series, noise.compare_runs for two single runs."""
    if ra and rb:
        return noise.compare_repeats([load_summary(r) for r in ra], [load_summary(r) for r in rb])
    if ra or rb:
        return noise.unavailable("one side is a repeat series, the other a single run: "
                                 "compare like with like", (len(ra), len(rb)))
    with reading(a):
        rec_a, meta_a, _ = summary_mod.load_run(a)
    with reading(b):
        rec_b, meta_b, _ = summary_mod.load_run(b)
    return noise.compare_runs(rec_a, meta_a, rec_b, meta_b)


def conditions(run_dir: str | Path, summary: Optional[dict] = None) -> dict:
    """{"must": {group: {field: value} | None}, "other": {field: value}} of one run."""
    d = Path(run_dir)
    meta, sut = RunMeta.read(_typed(read_meta, d)), Sut.read(_typed(read_sut, d))
    sc = man_mod.load_scenario_tree(d)                  # the user's scenario, as a tree
    s = Summary.read(summary if summary is not None else load_summary(d))
    m = man_mod.manifest(d)
    wl = sc.get("workload")
    if wl is None and meta.workload:
        wl = {k: getattr(meta.workload, k) for k in WORKLOAD_META_KEYS}   # named fields
    if wl is not None:
        wl = {**wl, "dataset_sha256": m["dataset"]["sha256"]}
    slo = s.slo or (Slo.read(slo_mod.resolve_slo_lenient(meta.slo)[0]) if meta.slo else None)
    mode = meta.mode or (sc.get("load") or {}).get("mode")
    info = sut.server_info or {}                        # the server's own /info
    load = {k: v for k, v in (sc.get("load") or {}).items() if k != "mode"} or {
        "rate": meta.rate, "in_flight_cap": meta.in_flight_cap,
        "num_requests": meta.num_requests, "duration_s": meta.duration_s}
    host = m["hardware"]["client_host"]
    other = {"model": meta.model or sut.model,
             "api": {k: (sc.get("api") or {}).get(k) for k in ("endpoint", "stream",
                                                               "ignore_eos", "include_usage")},
             "load": load,
             "server": {"kind": m["server"]["kind"], "argv": m["server"]["argv"],
                        "preset": info.get("preset"), "dtype": info.get("dtype"),
                        "slots": info.get("slots"), "max_model_len": info.get("max_model_len")},
             "device": m["hardware"]["server_device"],
             "versions": {"loadgen": m["tool"]["loadgen"],
                          **{k: v for k, v in info.items() if str(k).endswith("version")}},
             "client host": host["hostname"] if host else None,
             "power sources": m["hardware"]["power_sources"],
             "scenario sha256": (m["scenario"]["sha256"] or "")[:16] or None}
    return {"must": {"scenario type": {"mode": mode} if mode else None, "workload": wl,
                     "slo": {k: getattr(slo, k) for k in SLO_KEYS} if slo else None},
            "other": flatten(other)}


def _diff(values: list[dict]) -> list[str]:
    """Fields whose values are not all equal, as 'field: v1 vs v2 ...'."""
    keys = sorted(set().union(*values))
    return [f"{k}: " + " vs ".join(repr(v.get(k)) for v in values) for k in keys
            if len({repr(v.get(k)) for v in values}) > 1]


def names(dirs: list[Path]) -> list[str]:
    n = [d.name for d in dirs]
    return n if len(set(n)) == len(n) else [f"{d.parent.name}/{d.name}" for d in dirs]


METRICS = (("completed / failed", None), ("duration (s)", "duration_s"),
           ("request throughput (req/s)", "request_throughput"),
           ("output throughput (tok/s)", "output_throughput"), ("goodput (req/s)", "goodput"),
           ("TTFT p50 (ms)", ("ttft", "p50")), ("TTFT p99 (ms)", ("ttft", "p99")),
           ("TPOT p50 (ms)", ("tpot_ms", "p50")), ("TPOT p99 (ms)", ("tpot_ms", "p99")),
           ("ITL p99 (ms)", ("itl_ms", "p99")), ("E2E p99 (ms)", ("e2el_ms", "p99")))


def _label(label: str, s: Summary) -> str:
    """A METRICS label as it reads for summary ``s``: the TTFT rows say which TTFT they are
    (open loop: from the schedule; else from the send)."""
    if not label.startswith("TTFT "):
        return label
    start = "scheduled" if s.headline_ttft == "ttft_from_scheduled_ms" else "send"
    return label.replace("TTFT ", f"TTFT from {start} ", 1)


# the noise table's figures, labelled for what they are (ttft_ms: from the send)
NOISE_LABELS = {**noise.LABELS, "ttft_ms_p50": "TTFT from send p50 (ms)",
                "ttft_ms_p99": "TTFT from send p99 (ms)"}


def _value(s: Summary, key) -> Optional[float]:
    """A METRICS figure of ``s`` (named fields: a key not in the contract raises)."""
    if isinstance(key, tuple):
        k = (s.headline_ttft or "ttft_ms") if key[0] == "ttft" else key[0]
        return getattr(getattr(s, k) or Stats(), key[1])
    return getattr(s, key)


def _cell(v: Optional[float], base: Optional[float]) -> str:
    if v is None:
        return "n/a"
    if base in (None, 0) or v == base:
        return fmt(float(v), 3)
    return f"{float(v):.3f} ({(v - base) / base * 100:+.1f}%)"


def metric_rows(summaries: list[dict]) -> list[list[str]]:
    """One row per figure, one column per run; later runs show the change vs the first."""
    rows, summaries = [], [Summary.read(s) for s in summaries]
    for label, key in METRICS:
        if key is None:
            rows.append([label] + [f"{s.requests_completed} / {s.requests_failed}"
                                   for s in summaries])
            continue
        base = _value(summaries[0], key)
        rows.append([_label(label, summaries[0])] + [_cell(_value(s, key), base if i else None)
                               for i, s in enumerate(summaries)])
    e = [s.energy or Energy() for s in summaries]
    rows.append(["J / output token"] + [
        f"{fmt(x.j_per_output_token, 4)} "
        f"({x.status if 'status' in x.model_fields_set else 'unmeasured'})" for x in e])
    rows.append(["verdict"] + ["VALID" if s.verdict and s.verdict.valid else "INVALID"
                               for s in summaries])
    return rows


def compare(dirs: list[str | Path]) -> dict:
    """The comparison of two or more run directories (see the module docstring)."""
    paths = [Path(d) for d in dirs]
    series = [repeat_runs(p) for p in paths]
    per_run = [[load_summary(r) for r in rs] if rs else [load_summary(p)]
               for p, rs in zip(paths, series)]
    summaries = [mean_summary(ss) if rs else ss[0] for ss, rs in zip(per_run, series)]
    stale = [line for rs, p, ss in zip(series, paths, per_run)
             for r, s in zip(rs or [p], ss) for line in stored_disagrees(r, s)]
    conds = []
    for p, rs, ss in zip(paths, series, per_run):
        with reading(rs[0] if rs else p):
            conds.append(conditions(rs[0] if rs else p, ss[0]))
    label = [f"{n} (mean of {len(rs)} runs)" if rs else n
             for n, rs in zip(names(paths), series)]
    refusals = []
    for group in ("scenario type", "workload", "slo"):
        vals = [c["must"][group] for c in conds]
        missing = [n for n, v in zip(label, vals) if v is None]
        if missing:
            refusals.append(f"{group} not recorded for {', '.join(missing)}: cannot check it")
            continue
        refusals += [f"{group} differs: {d}" for d in _diff([flatten(v) for v in vals])]
    pairs = [] if refusals else [
        {"a": label[0], "b": label[i], **_noise(paths[0], paths[i], series[0], series[i])}
        for i in range(1, len(paths))]
    return {"runs": label, "dirs": [str(p) for p in paths], "comparable": not refusals,
            "refusals": refusals, "differences": _diff([c["other"] for c in conds]),
            "metrics": metric_rows(summaries), "figures": pairs[0]["figures"] if pairs else {},
            "pairs": pairs, "summaries": summaries, "stale": stale,
            "phases": phase_changes(summaries, label) if not refusals else None}


def regressions(result: dict, pct: float) -> list[str]:
    """'figure +x.x % (b vs a, 95 % interval lo .. hi, METHOD)' for every figure whose whole
    interval lies beyond ``pct`` % worse (noise.regressions), over every pair (each later run
    against the first)."""
    out = []
    for pair in result.get("pairs") or []:
        for name in noise.regressions(pair["figures"], pct):
            f = pair["figures"][name]
            out.append(f"{name} {f['change_pct']:+.1f}% ({pair['b']} vs {pair['a']}, 95 % "
                       f"interval {f['ci_pct'][0]:+.1f}% .. {f['ci_pct'][1]:+.1f}%, "
                       f"{method_label(f)})")
    return out


def method_label(f: dict) -> str:
    """How a figure's interval was found, short: 'within run: bootstrap over requests' or
    'between repeats: Welch's t (3 vs 3 runs)'; 'none' without a method."""
    m = f.get("method")
    if not m:
        return "none"
    if f.get("basis") == "between repeats":
        n = f.get("n") or [None, None]
        return f"between repeats: Welch's t ({n[0]} vs {n[1]} runs)"
    return "within run: " + m.split(" (")[0]


def single_runs(result: dict) -> bool:
    """Is some pair two single runs (within-run intervals only)?"""
    return any(f.get("basis") == "within run" for pair in result.get("pairs") or []
               for f in pair["figures"].values())


GATE_NOTE = ("gating single runs: their intervals are within-run (bootstrap over requests or "
             "time buckets) and do not see run-to-run drift (server state, host load); gate on "
             "--repeat N series (between-run variance, Welch's t) instead: docs/metrics.md")


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def noise_rows(figures: dict) -> list[list[str]]:
    """figure | A | B | change | 95 % interval | verdict | method."""
    rows = []
    for name, f in figures.items():
        ci = f["ci_pct"]
        rows.append([NOISE_LABELS.get(name, name), fmt(f["a"], 3), fmt(f["b"], 3),
                     _pct(f["change_pct"]),
                     f"{_pct(ci[0])} .. {_pct(ci[1])}" if ci else "n/a", noise.verdict(f),
                     method_label(f)])
    return rows


def blocks(result: dict) -> list[Block]:
    out: list[Block] = [("title", "loadgen compare — " + " vs ".join(result["runs"]))]
    if not result["comparable"]:
        out += [("p", "INVALID comparison: conditions that must match differ.")]
        out += [("warn", r) for r in result["refusals"]]
        return out
    out += [("p", "Scenario type, workload and SLO match (checked); figures measured "
                  "client-side, recomputed from each run's records. Percentages: change "
                  "against the first run.")]
    out += [("warn", f"{line} (`loadgen report` rewrites it)")
            for line in result.get("stale") or ()]
    out += [("table", ["figure", *result["runs"]], result["metrics"])]
    for pair in result.get("pairs") or []:
        method = "; ".join(sorted({f["method"] for f in pair["figures"].values() if f["method"]}))
        out += [("h", f"Change and noise: {pair['b']} against {pair['a']}"),
                ("p", "95 % interval of the change; 'significant' when it excludes 0 (" + method
                 + "). Within-run intervals do not see run-to-run drift; --repeat runs do "
                 "(between repeats). --fail-on-regression PCT fails a figure only when its "
                 "whole interval lies beyond PCT %; a tail figure needs 10 values beyond its "
                 "quantile for an interval (p99: 1,000)."),
                ("table", ["figure", "A", "B", "change", "95 % interval", "verdict", "method"],
                 noise_rows(pair["figures"]))]
    out += phase_blocks(result.get("phases"))
    out += [("h", "Conditions that differ")]
    diffs = result["differences"]
    out += [("table", ["condition: values in run order"], [[d] for d in diffs])] if diffs \
        else [("p", "No recorded condition differs.")]
    return out
