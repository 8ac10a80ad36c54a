"""Fixtures for the JAX server tests: a real `python -m servers.jax` subprocess on 127.0.0.1, and an
in-process app over the hand-written FakeOrchestrator (tests/servers/jax/fakes.py)."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HOST = "127.0.0.1"
# a small context keeps the warm-up (one compile per prefill/decode bucket) short
TINY_ARGS = ["--preset", "tiny", "--max-model-len", "256"]


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

    cache_dir: JAX's persistent compilation cache, shared by the test servers (same prefill shapes) and
    kept between local runs under .pytest_cache; it only skips recompiling identical programs."""
    port = free_port()
    log_path = tmp_dir / f"server-{port}.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1", JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    if cache_dir is not None:
        env.update(JAX_COMPILATION_CACHE_DIR=str(cache_dir), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
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


@pytest.fixture(scope="session")
def jax_cache_dir(request, tmp_path_factory) -> Path:
    cache = getattr(request.config, "cache", None)  # None with -p no:cacheprovider
    if cache is None:
        return tmp_path_factory.mktemp("jax-compilation-cache")
    return Path(cache.mkdir("jax-compilation-cache"))


@pytest.fixture(scope="session")
def jax_server(tmp_path_factory, jax_cache_dir) -> ServerProc:
    """The shared real server (tiny preset, 4 slots) for most API tests."""
    srv = start_server(tmp_path_factory.mktemp("jax-server"), ["--slots", "4", "--seed", "0"], jax_cache_dir)
    yield srv
    srv.stop()
