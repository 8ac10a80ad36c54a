"""The calibration server in its own interpreter, as a context manager (tests, bench/).

    with CalibrationServer(ttft_ms=50, itl_ms=10) as s:
        s.url ─► point the client there;  s.log() ─► GET /calib/log (the server's write times)
    python -m servers.calib --port 0 ─► "PORT <n>" on stdout ─► s.port; stop: SIGTERM, SIGKILL after 5 s
Its own process, so the server never shares a GIL with the client being measured.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]


class CalibrationServer:
    """``with CalibrationServer(ttft_ms=50) as s: s.url, s.log()`` — a subprocess on 127.0.0.1."""

    def __init__(self, ttft_ms: float = 0.0, itl_ms: float = 0.0, log: bool = True,
                 cpu: Optional[int] = None, startup_timeout_s: float = 20.0, lockstep: bool = False):
        self.argv = [sys.executable, "-m", "servers.calib", "--port", "0",
                     "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)]
        if lockstep:
            self.argv.append("--lockstep")
        if not log:
            self.argv.append("--no-log")
        if cpu is not None:
            self.argv += ["--cpu", str(cpu)]
        self.startup_timeout_s = startup_timeout_s
        self.proc: Optional[subprocess.Popen] = None
        self.port: Optional[int] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "CalibrationServer":
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], self.startup_timeout_s)
        line = self.proc.stdout.readline() if ready else ""   # "PORT n", or "" if it died
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"calibration server did not start within "
                               f"{self.startup_timeout_s:g} s: {line!r}")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> "CalibrationServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _get(self, path: str, clear: bool) -> list:
        with urllib.request.urlopen(f"{self.url}{path}{'?clear=1' if clear else ''}", timeout=30) as r:
            return json.loads(r.read())

    def log(self, clear: bool = False) -> list[dict]:
        """GET /calib/log: per request its arrival, each write [ns, tokens], headers, body."""
        return self._get("/calib/log", clear)

    def clear(self) -> None:
        self.log(clear=True)

    def clock(self, clear: bool = False) -> list[dict]:
        """The lockstep decode clocks (GET /calib/clock): per tick [k, planned_ns, start_ns, end_ns, streams]."""
        return self._get("/calib/clock", clear)
