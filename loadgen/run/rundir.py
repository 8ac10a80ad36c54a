"""The run directory: its name, the resolved scenario.yaml, JSON files and the summary step.

    output.dir / (output.run_name or {YYYYmmdd-HHMMSS}-{name}) /
        scenario.yaml   resolved scenario; secrets never written (api_key_env is a NAME;
                        header/arg/env values whose key looks secret are redacted)
        records.jsonl, sut.json, meta.json, power.jsonl   (written by runner.py and friends)
        summary.json    analysis.metrics.summary.summarize(records, meta, power rows)
        report.md/html  analysis.report.report.write_report (output.report: full | text | none)
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional

import yaml

from loadgen.record import read_records
from loadgen.scenario.model import Scenario, ScenarioError

SECRET_WORDS = ("auth", "key", "token", "secret", "cookie", "password")


def run_dir_for(sc: Scenario) -> Path:
    name = sc.output.run_name or f"{time.strftime('%Y%m%d-%H%M%S')}-{sc.name}"
    d = Path(sc.output.dir) / name
    if (d / "records.jsonl").exists():
        raise ScenarioError(f"output.run_name: {d} already holds a run (records.jsonl); "
                            "choose another name or remove it")
    return d


def resolved_yaml(sc: Scenario) -> str:
    """The scenario as run (defaults and overrides applied), secret-looking values redacted."""
    tree = sc.model_dump(mode="json")
    server = (tree.get("target") or {}).get("server") or {}
    for d in ((tree.get("api") or {}).get("headers"), server.get("args"), server.get("env")):
        for k in d or {}:
            if any(w in k.lower() for w in SECRET_WORDS):
                d[k] = "<redacted>"
    return yaml.safe_dump(tree, sort_keys=False)


def api_key(sc: Scenario) -> Optional[str]:
    name = sc.api.api_key_env
    if not name:
        return None
    val = os.environ.get(name)
    if not val:
        raise ScenarioError(f"api.api_key_env: environment variable {name} is not set")
    return val


def write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, default=str) + "\n", encoding="utf-8")


def summarize_dir(run_dir: Path, meta: dict, report: str = "full") -> dict:
    """summary.json from the records on disk and ``meta`` (analysis.metrics.summary); then the report."""
    from analysis.metrics.summary import load_power, summarize
    from analysis.server.metrics import server_metrics_summary
    summary = summarize(read_records(run_dir / "records.jsonl"), meta, load_power(run_dir))
    summary["server_metrics"] = server_metrics_summary(run_dir)
    write_json(run_dir / "summary.json", summary)
    if report != "none":
        try:  # the report is a convenience; summary.json is the data
            from analysis.report.report import write_report
            write_report(run_dir, with_plots=report == "full")
        except Exception as e:
            (run_dir / "report.error.txt").write_text(f"{type(e).__name__}: {e}\n")
    return summary
