"""Every file in scenarios/ runs end to end (issue 29 item 15): ``python -m loadgen run`` (or
``sweep`` for a file with a ``sweep:`` block) as a new user would, kept short with ``--set``
(a few requests, seconds of duration), against the server it names: the managed JAX server for
``target.server`` files, the calibration server (an OpenAI-compatible stand-in, two of them for
``target.urls``) for files that name a running server's URL. A file that cannot run as shipped
(sessions.yaml did not: its longest conversation exceeded the server's context) fails here.
Slow (each JAX file compiles its server): ``pytest -m slow tests/test_scenarios_e2e.py``."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.scenario.loader import load_scenario
from servers.calib import MODEL, CalibrationServer

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.fixture(scope="module")
def calib_pair():
    with CalibrationServer() as a, CalibrationServer() as b:
        yield a.url, b.url


def short(path: Path, out: Path, urls: tuple[str, str]) -> list[str]:
    """--set overrides that keep ``path`` short and point a URL target at the stand-in."""
    sc = load_scenario(path)
    ld = sc.load
    sets = [f"output.dir={out}", f"output.run_name={path.stem}", "output.report=text"]
    if ld.num_requests is not None:
        sets.append(f"load.num_requests={4 if ld.mode != 'offline' else 6}")
    if ld.duration_s is not None:
        sets += ["load.duration_s=3", "load.num_requests=null"] if ld.num_requests is None \
            else ["load.duration_s=3"]
    if ld.warmup_requests:
        sets.append("load.warmup_requests=1")
    if ld.min_duration_s:
        sets.append("load.min_duration_s=0")
    if ld.min_queries:
        sets.append("load.min_queries=0")
    if ld.mode == "trace":
        sets.append("load.time_scale=0.05")
    if getattr(ld, "probe", None) is not None:
        sets.append("load.probe.alone_requests=2")
    if sc.sweep is not None:
        sets.append(f"sweep.values=[{', '.join(f'{v:g}' for v in sc.sweep.values[:2])}]")
    if sc.target.urls:
        sets.append(f"target.urls=[{urls[0]}, {urls[1]}]")
    elif sc.target.url:
        sets.append(f"target.url={urls[0]}")
    if sc.target.server is None and sc.api.model:
        sets.append(f"api.model={MODEL}")
    return [x for s in sets for x in ("--set", s)]


@pytest.mark.slow
@pytest.mark.timeout(1800)      # a JAX file compiles its server: minutes on a busy box
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_scenario_runs_end_to_end(path, tmp_path, calib_pair):
    sc = load_scenario(path)
    cmd = "sweep" if sc.sweep is not None else "run"
    args = [sys.executable, "-m", "loadgen", cmd, str(path), *short(path, tmp_path, calib_pair)]
    if cmd == "run":
        args.append("--json")
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{path.name}: exit {r.returncode}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr
    if cmd == "run":
        summary = json.loads(r.stdout)["summary"]
        assert summary["requests_completed"] > 0, r.stderr[-3000:]
        if sc.workload.dataset is not None:      # the accuracy check ran beside the speed
            assert summary["accuracy"]["ran"] and summary["accuracy"]["n"] > 0
        if sc.cost is not None:
            assert summary["cost"]["usd_per_million_output_tokens"] is not None
    else:
        assert list(tmp_path.rglob("summary.json")), r.stderr[-3000:]
