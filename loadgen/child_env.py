"""The environment of a Python child that loadgen starts from its own modules (``python -m
loadgen....``): the /metrics scrape worker (targets/scrape.py), the --procs sender processes
(engine/procs/parent.py), the Locust processes (engine/locust/run.py), the live exporter
(live/process.py). Imports no other loadgen module, so every package may use it."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])    # the tree holding loadgen/, analysis/, servers/


def child_env() -> dict:
    """This process's environment with this source tree first on PYTHONPATH: the child imports
    the same loadgen as its parent (a checkout used without installing it, a worktree)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
