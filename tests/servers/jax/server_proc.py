"""A real `python -m servers.jax` subprocess on 127.0.0.1 for tests: start it on a free port, wait for
/health, read its log, stop it. The shared session servers are fixtures of tests/conftest.py
(``jax_server``, ``jax_url``); a test that needs other flags starts its own with ``start_server``
(``started``: the same as a context manager that stops it). ``metrics(base_url)``: its /metrics
as {name + labels (JSON, model_name left out): value}."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[3]
HOST = "127.0.0.1"
# a small context keeps the warm-up (one compile per prefill/decode bucket) short
TINY_ARGS = ["--preset", "tiny", "--max-model-len", "256"]


def metrics(base_url: str) -> dict:
    with urllib.request.urlopen(base_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = {k: v for k, v in s.labels.items() if k != "model_name"}
            out[s.name + (json.dumps(labels, sort_keys=True) if labels else "")] = s.value
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass
class ServerProc:
    proc: subprocess.Popen
    base_url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def running_and_waiting(self) -> tuple[float, float]:
        """vllm:num_requests_running and vllm:num_requests_waiting from /metrics."""
        with urllib.request.urlopen(self.base_url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        got = {}
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
                got[name] = float(line.rsplit(" ", 1)[1])
        return got["vllm:num_requests_running"], got["vllm:num_requests_waiting"]

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Until no request runs or waits (a shared server handed to the next test as it started:
        an earlier test's cancelled stream may hold its slot a moment). Bounded; raises with the log."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            if self.running_and_waiting() == (0.0, 0.0):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"server still busy after {timeout}s: {self.running_and_waiting()}")
            time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait; kill if it does not exit. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def start_server(tmp_dir: Path, extra: list[str], cache_dir: Path | None = None,
                 wait_s: float = 240.0) -> ServerProc:
    """Start the real server on a free loopback port and wait until /health answers 200.

    cache_dir: JAX's persistent compilation cache; None: the one the environment names, which the
    suite sets to its own session directory (tests/conftest.py). It only skips recompiling identical
    programs."""
    port = free_port()
    log_path = tmp_dir / f"server-{port}.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1", JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    if cache_dir is not None:
        env.update(SERVERS_JAX_CACHE_DIR=str(cache_dir), JAX_COMPILATION_CACHE_DIR=str(cache_dir),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    with open(log_path, "wb") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "servers.jax", *TINY_ARGS, "--host", HOST,
                                 "--port", str(port), *extra], cwd=REPO, env=env, stdout=logf,
                                stderr=subprocess.STDOUT)
    srv = ServerProc(proc, f"http://{HOST}:{port}", log_path)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{srv.log()[-3000:]}")
        with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
            with urllib.request.urlopen(srv.base_url + "/health", timeout=2) as r:
                if r.status == 200:
                    return srv
        time.sleep(0.2)
    srv.stop()
    raise RuntimeError(f"server not healthy after {wait_s}s:\n{srv.log()[-3000:]}")


@contextlib.contextmanager
def started(tmp_dir: Path, extra: list[str], cache_dir: Path | None = None) -> Iterator[ServerProc]:
    """``start_server``, stopped on the way out (a module's own server: ``with started(...) as
    srv: yield srv`` in its fixture)."""
    srv = start_server(tmp_dir, extra, cache_dir)
    try:
        yield srv
    finally:
        srv.stop()
