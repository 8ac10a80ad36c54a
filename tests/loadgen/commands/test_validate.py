"""``loadgen validate SCENARIO [--set ...]`` and ``loadgen run --dry-run`` (the same thing):
load, resolve and print the plan without sending anything — exit 0, or one line and exit 2 for a
bad scenario. Every scenarios/*.yaml is validated here (no server is started: nothing listens
at the targets' URLs and managed servers are only described)."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml

from loadgen.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_shipped_scenario_validates_and_prints_its_plan(path, tmp_path):
    code, out, err = cli("validate", path, "--set", f"output.dir={tmp_path}")
    assert code == 0, err
    for head in ("scenario:", "target:", "load:", "workload:", "resolved scenario:"):
        assert head in out, f"{path.name}: no {head!r} in the plan"
    assert list(tmp_path.iterdir()) == []          # nothing written, nothing run


def test_the_plan_says_what_would_run(tmp_path):
    code, out, _ = cli("validate", ROOT / "scenarios" / "server.yaml",
                       "--set", "load.rate=3", "--set", "load.num_requests=40")
    assert code == 0
    assert "managed jax server (preset small): loadgen would start and stop it" in out
    assert "mode server" in out and "3 requests/s" in out and "40 measured requests" in out
    assert "prompt tokens" in out and "output tokens" in out
    code, out, _ = cli("validate", ROOT / "scenarios" / "external.yaml", "--json")
    plan = json.loads(out)
    assert plan["target"]["starts_server"] is False and plan["target"]["url"]
    assert plan["load"]["mode"] and plan["workload"]["prompt_tokens"]["max"] >= 1
    assert plan["resolved"]["target"]["url"] == plan["target"]["url"]


def test_run_dry_run_is_validate(tmp_path):
    p = ROOT / "scenarios" / "concurrency.yaml"
    assert cli("run", p, "--dry-run") == cli("validate", p)


def test_a_bad_scenario_is_one_line_and_exit_2(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"target": {"url": "http://127.0.0.1:9"},
                                 "load": {"mode": "server", "rate": 0, "num_requests": 2}}))
    code, out, err = cli("validate", p)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"loadgen: error: {p}: load.rate: Input should be "
                                        "greater than 0"]
    code, _, err = cli("validate", tmp_path / "missing.yaml")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no such scenario file" in err
    code, _, err = cli("run", p, "--dry-run", "--set", "load.rate=x")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "load.rate" in err
