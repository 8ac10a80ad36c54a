"""One compat run: a scenario dict ─► the real CLI (``python -m loadgen run X.yaml --json``) ─► its outcome.

    sc (a scenario dict) + a scratch dir ─► run_loadgen ─► {rc, wall_s, stdout_tail, stderr_tail, run_dir}

Used by matrix.py (the matrix rows) and served.py (speculative decoding, LoRA); neither imports the
other for it. A run longer than RUN_TIMEOUT_S is an outcome (rc "timeout"), not a crash.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml

from bench.compat.paths import REPO

RUN_TIMEOUT_S = 900


def run_loadgen(sc: dict, tmp: Path) -> dict:
    """Write ``sc`` and run the real CLI on it; {rc, wall_s, stdout_tail, stderr_tail, run_dir}."""
    path = tmp / f"{sc['name']}.yaml"
    path.write_text(yaml.safe_dump(sc, sort_keys=False))
    out = Path(sc["output"]["dir"])
    before = set(out.glob("*")) if out.exists() else set()
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "loadgen", "run", str(path), "--json"], cwd=REPO,
                           capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else \
            (e.stdout or ""), str(e)
    new = sorted(set(out.glob("*")) - before) if out.exists() else []
    return {"rc": rc, "wall_s": round(time.monotonic() - t0, 1), "stdout_tail": so[-1500:],
            "stderr_tail": se[-1500:], "run_dir": str(new[-1]) if new else None}
