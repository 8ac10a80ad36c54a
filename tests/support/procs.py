"""Driving a ``loadgen`` run from a test: run the CLI on a scenario file, wait for a sign of
progress, interrupt it, and never leave it running when the test fails half-way.

    loadgen_cli("run", scenario_file(tmp_path, tree), "--json", timeout_s=60)
                                              the scenario as tmp_path/s.yaml, then ``python -m
                                              loadgen run s.yaml --json`` ─► CompletedProcess
    ExplodingProgress(at=3)                   an in-process run's display that raises
                                              KeyboardInterrupt at the 3rd finished measured record

    with reaped(proc): ...                    on the way out, a process still running is killed
                                              and its pipes drained
    interrupt_after(proc, ready, 60)          poll ready() (the process must stay alive), then
                                              SIGINT (or sig) ─► (stdout, stderr)
    interrupt(proc, 60)                       SIGINT now ─► (stdout, stderr)
    interrupt_after_first_ok(proc, run_dir)   the same once a measured request has finished ok
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import yaml

from loadgen.record import read_records
from loadgen.console.progress import RunProgress

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def reaped(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def interrupt(proc: subprocess.Popen, timeout_s: float, sig=signal.SIGINT) -> tuple[str, str]:
    proc.send_signal(sig)
    return proc.communicate(timeout=timeout_s)


def interrupt_after(proc: subprocess.Popen, ready: Callable[[], bool], wait_s: float,
                    sig=signal.SIGINT, timeout_s: float | None = None) -> tuple[str, str]:
    """Poll ``ready()`` every 50 ms for up to ``wait_s`` (asserting the process is still running),
    then send ``sig`` and wait ``timeout_s`` (default ``wait_s``) for its end."""
    with reaped(proc):
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if ready():
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        return interrupt(proc, wait_s if timeout_s is None else timeout_s, sig)


def interrupt_after_first_ok(proc: subprocess.Popen, run_dir: Path, sig=signal.SIGINT
                             ) -> tuple[str, str]:
    """``sig`` once the run's first measured request has finished ok (60 s at most)."""
    rec_path = run_dir / "records.jsonl"
    return interrupt_after(proc, lambda: rec_path.is_file() and any(
        r["phase"] == "measured" and r["status"] == "ok" for r in read_records(rec_path)), 60, sig)


def scenario_file(tmp_path: Path, tree: dict, stem: str = "s") -> Path:
    path = tmp_path / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def loadgen_cli(*args, timeout_s: float) -> subprocess.CompletedProcess:
    """``python -m loadgen ARGS`` from the repository root (on PYTHONPATH), output captured."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "loadgen", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout_s, env=env)


class ExplodingProgress(RunProgress):
    """A progress display that raises KeyboardInterrupt at the ``at``-th finished measured
    record (once): a run that ends mid-way."""

    def __init__(self, at: int):
        super().__init__(None, enabled=False)
        self.at, self.fired = at, False

    def on_done(self, rec):
        super().on_done(rec)
        if rec.phase == "measured" and self.completed == self.at and not self.fired:
            self.fired = True
            raise KeyboardInterrupt
