"""The calibration server in its own interpreter, as a context manager (tests, bench/).

    with CalibrationServer(ttft_ms=50, itl_ms=10) as s:
        s.url ─► point the client there;  s.log() ─► GET /calib/log (the server's write times)
    python -m servers.calib --port 0 ─► "PORT <n>" on stdout ─► s.port; stop: SIGTERM, SIGKILL after 5 s
Its own process, so the server never shares a GIL with the client being measured.
"""
from __future__ import annotations

import json
import sys
import urllib.request
from typing import Optional

from servers.port_server import PortServer


class CalibrationServer(PortServer):
    """``with CalibrationServer(ttft_ms=50) as s: s.url, s.log()`` — a subprocess on 127.0.0.1
    (started and stopped by servers.port_server.PortServer)."""

    label = "calibration server"

    def __init__(self, ttft_ms: float = 0.0, itl_ms: float = 0.0, log: bool = True,
                 cpu: Optional[int] = None, startup_timeout_s: float = 20.0, lockstep: bool = False,
                 models: Optional[list] = None, otlp_endpoint: Optional[str] = None):
        argv = [sys.executable, "-m", "servers.calib", "--port", "0",
                "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)]
        if lockstep:
            argv.append("--lockstep")
        if not log:
            argv.append("--no-log")
        if cpu is not None:
            argv += ["--cpu", str(cpu)]
        if models:
            argv += ["--models", ",".join(models)]
        if otlp_endpoint:
            argv += ["--otlp-endpoint", otlp_endpoint]
        super().__init__(argv, startup_timeout_s)

    def _get(self, path: str, clear: bool) -> list:
        with urllib.request.urlopen(f"{self.url}{path}{'?clear=1' if clear else ''}", timeout=30) as r:
            return json.loads(r.read())

    def log(self, clear: bool = False) -> list[dict]:
        """GET /calib/log: per request its arrival, each write [ns, tokens], headers, body."""
        return self._get("/calib/log", clear)

    def clear(self) -> None:
        self.log(clear=True)

    def reset(self) -> int:
        """POST /calib/reset: forget every ``rate_limit_first`` count; how many there were."""
        req = urllib.request.Request(f"{self.url}/calib/reset", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            return int(json.loads(r.read())["forgotten"])

    def spans(self) -> dict:
        """GET /calib/spans (--otlp-endpoint): {sent: {trace id: attributes (s)}, dropped, ...}."""
        with urllib.request.urlopen(f"{self.url}/calib/spans", timeout=30) as r:
            return json.loads(r.read())

    def clock(self, clear: bool = False) -> list[dict]:
        """The lockstep decode clocks (GET /calib/clock): per tick [k, planned_ns, start_ns, end_ns, streams]."""
        return self._get("/calib/clock", clear)
