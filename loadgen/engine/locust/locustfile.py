"""A locustfile for running loadgen's LLM user with Locust's own command line and web UI.

    LOADGEN_SCENARIO=scenario.yaml locust -f $(python -c "import loadgen.engine.locust.locustfile
        as m; print(m.__file__)") [--host URL] [--headless -u 8 -r 8]   (or --master / --worker)
Each test start runs the plan/warm/go protocol of ``loadgen run --engine locust`` with Locust's
user count as the in-flight bound, into LOADGEN_RUN_DIR (default runs/locust-<time>-<name>),
merged to records.jsonl at its end. Locust's charts are for watching (its stats round); the
target is --host, else target.url; the model api.model, else GET /v1/models' first.
Environment: LOADGEN_SCENARIO, LOADGEN_SET (``;``-separated overrides), LOADGEN_RUN_DIR,
LOADGEN_WORKER_DIR.
"""
from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import gevent
from gevent.event import Event
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from loadgen.engine.locust.user import LLMUser  # noqa: F401  (the user class Locust runs)
from loadgen.run.rundir import api_key
from loadgen.scenario.loader import load_scenario

_STATE: dict = {}


def _scenario():
    path = os.environ.get("LOADGEN_SCENARIO")
    if not path:
        raise SystemExit("loadgen locustfile: set LOADGEN_SCENARIO=path/to/scenario.yaml")
    sets = [s for s in os.environ.get("LOADGEN_SET", "").split(";") if s.strip()]
    return load_scenario(path, sets)


def _model(base_url: str, sc) -> str:
    if sc.api.first_model:
        return sc.api.first_model
    with urllib.request.urlopen(base_url.rstrip("/") + "/v1/models", timeout=30) as r:
        return json.loads(r.read())["data"][0]["id"]


@events.init.add_listener
def _on_init(environment, **kw):
    sc = _STATE["sc"] = _scenario()
    _STATE["runs"] = 0
    if isinstance(environment.runner, WorkerRunner):
        from loadgen.engine.locust.worker import WorkerHandler
        d = os.environ.get("LOADGEN_WORKER_DIR") or f"loadgen-locust-worker-{os.getpid()}"
        args = SimpleNamespace(records_dir=d, run_dir=None, forward=True)
        _STATE["handler"] = WorkerHandler(environment, sc, args, api_key(sc))
        return
    _STATE["run_dir"] = Path(os.environ.get("LOADGEN_RUN_DIR")
                             or f"runs/locust-{time.strftime('%Y%m%d-%H%M%S')}-{sc.name}")
    if isinstance(environment.runner, MasterRunner):   # each test start: a new Coordinator
        from loadgen.engine.locust.coordinator import listen
        listen(environment.runner, lambda: _STATE.get("coord"))


@events.test_start.add_listener
def _on_test_start(environment, **kw):
    if isinstance(environment.runner, WorkerRunner) or "run_dir" not in _STATE:
        return
    from loadgen.engine.locust.coordinator import Coordinator
    sc = _STATE["sc"]
    base_url = (environment.host or sc.target.primary_url or "").rstrip("/")
    if not base_url:
        raise SystemExit("loadgen locustfile: give --host or target.url in the scenario")
    _STATE["runs"] += 1
    k, run_dir = _STATE["runs"], _STATE["run_dir"]
    if k > 1:                                  # started again from the UI: a new directory
        run_dir = run_dir.with_name(f"{run_dir.name}-{k}")
    run_dir.mkdir(parents=True, exist_ok=True)
    local = not isinstance(environment.runner, MasterRunner)
    coord = Coordinator(environment, sc, 1 if local else None,
                        {"base_url": base_url, "model": _model(base_url, sc), "run_seq": k},
                        run_dir, api_key=api_key(sc), local=local, start_users=False)
    _STATE["coord"] = coord
    _STATE["merged"] = Event()
    gevent.spawn(_conduct, environment, coord)


@events.test_stop.add_listener
def _on_test_stop(environment, **kw):
    coord = _STATE.get("coord")
    if coord is not None and not coord.finished.is_set():
        coord.interrupt("stopped from Locust (UI, --run-time or Ctrl-C) before the request ended")


@events.quitting.add_listener
def _on_quitting(environment, **kw):
    merged = _STATE.get("merged")
    if merged is not None:                   # let the last records land and be merged
        _on_test_stop(environment)
        merged.wait(30.0)


def _conduct(environment, coord) -> None:
    try:
        coord.run()
        _merge(coord)
    finally:
        _STATE["merged"].set()
    opts = environment.parsed_options
    if opts is not None and getattr(opts, "headless", False) and not coord.stopping:
        environment.runner.quit()


def _merge(coord) -> None:
    from loadgen.engine.core.journal import merge_master
    from loadgen.engine.core.plan import Plan
    st = coord.state
    counts = merge_master(coord.run_dir, coord.run_dir, Plan(coord.sc), st, coord.n or 1)
    print(f"loadgen: {counts['records']} records in "
          f"{coord.run_dir / ('records.' + coord.sc.output.records)}"
          + (f" (error: {st['error']})" if st["error"] else ""), flush=True)
