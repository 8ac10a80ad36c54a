"""Managed servers: start the system under test, wait until healthy, always stop it.

    target.server (ServerSpec) ─► argv (jax | vllm via servers.vllm.launch | command; "{port}" filled)
        ─► Popen (own session, stdout+stderr ─► run_dir/server.log)
        ─► poll GET health_path until 200 (bounded by startup_timeout_s; exit or timeout
           ─► ServerStartError with the exit code and the log's tail)
        ─► GET /info (JSON describe of the SUT, if the server has one)
        ─► servers.vllm.launch.describe_server (flags, GPUs, vLLM version) ─► describe()["sut"]
        ─► stop: SIGINT, then SIGTERM, then SIGKILL, each with a timeout — on normal exit,
           exception and Ctrl-C alike (``with ManagedServer(...) as srv:``)

The child runs in its own session so a terminal Ctrl-C reaches loadgen only; loadgen then
finishes its records and stops the server itself.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from loadgen.scenario.model import ScenarioError
from loadgen.scenario.target import ServerSpec
from servers.vllm.launch import LaunchError, build_vllm_argv, describe_server, extra_args


class ServerStartError(RuntimeError):
    """The managed server exited or never became healthy; ``str()`` ends with the log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def build_argv(spec: ServerSpec, port: int) -> list[str]:
    """The command line that starts ``spec`` on 127.0.0.1:``port``."""
    if spec.kind == "command":
        if not spec.command:
            raise ScenarioError("target.server.command: kind command needs an argv list")
        return [a.replace("{port}", str(port)) for a in spec.command]
    if spec.kind == "jax":
        argv = [sys.executable, "-m", "servers.jax"]
        if not spec.model:  # a model directory replaces the synthetic preset
            argv += ["--preset", spec.preset]
        argv += ["--port", str(port), "--host", "127.0.0.1"]
        for flag, val in (("--dtype", spec.dtype), ("--slots", spec.slots),
                          ("--max-model-len", spec.max_model_len),
                          ("--max-queue", spec.max_queue), ("--model", spec.model)):
            if val is not None:
                argv += [flag, str(val)]
        return argv + extra_args(spec.args)
    try:
        return build_vllm_argv(spec, port)
    except LaunchError as e:     # one line: the field and the install hint
        raise ScenarioError(str(e)) from None


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no server log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(server log is empty)"


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


class ManagedServer:
    """Context manager around one server process. Attributes once entered: ``base_url``,
    ``port``, ``argv``, ``info`` (GET /info JSON or None), ``startup_s``, ``returncode``."""

    def __init__(self, spec: ServerSpec, run_dir: str | Path, poll_s: float = 0.25,
                 stop_timeouts_s: tuple[float, float, float] = (10.0, 5.0, 5.0)):
        self.spec = spec
        self.log_path = Path(run_dir) / "server.log"
        self.poll_s = poll_s
        self.stop_timeouts_s = stop_timeouts_s
        self.port = spec.port or free_port()
        self.argv = build_argv(spec, self.port)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: Optional[subprocess.Popen] = None
        self.info: Optional[dict] = None
        self.sut: Optional[dict] = None
        self.startup_s: Optional[float] = None
        self.returncode: Optional[int] = None
        self.stopped_with: Optional[str] = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "ManagedServer":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.spec.env}
        t = time.monotonic()
        cpus = self.spec.cpus
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        try:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True, preexec_fn=pin)
        except OSError as e:
            raise ServerStartError(f"target.server: cannot start {self.argv[0]}: {e}") from None
        finally:
            log.close()  # the child holds its own descriptor
        try:  # __exit__ never runs when __enter__ raises: stop the child here, whatever raised
            self._wait_healthy(t)
            self.startup_s = time.monotonic() - t
            self.info = self._fetch_info()
            try:  # flags, GPUs, vLLM version: every probe bounded, "unavailable" when it cannot say
                self.sut = describe_server(self.spec, self.argv, self.base_url)
            except Exception as e:
                self.sut = {"status": "unavailable", "reason": f"{type(e).__name__}: {e}"}
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, t_start: float) -> None:
        url = self.base_url + self.spec.health_path
        deadline = t_start + self.spec.startup_timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ServerStartError(
                    f"target.server: server exited with code {code} before it was healthy "
                    f"({self.log_path}):\n{log_tail(self.log_path)}")
            try:
                status, _ = _get(url, timeout=2.0)
                if status == 200:
                    return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"target.server.startup_timeout_s: {url} not healthy after "
                    f"{self.spec.startup_timeout_s:g} s ({self.log_path}):\n"
                    f"{log_tail(self.log_path)}")
            time.sleep(self.poll_s)

    def _fetch_info(self) -> Optional[dict]:
        try:
            status, body = _get(self.base_url + "/info", timeout=5.0)
            return json.loads(body) if status == 200 else None
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def stop(self) -> Optional[int]:
        """SIGINT, then SIGTERM, then SIGKILL (to the child's process group); idempotent."""
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            for sig, name, wait in zip((signal.SIGINT, signal.SIGTERM, signal.SIGKILL),
                                       ("SIGINT", "SIGTERM", "SIGKILL"), self.stop_timeouts_s):
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    try:
                        p.send_signal(sig)
                    except ProcessLookupError:
                        break
                try:
                    p.wait(timeout=wait)
                    self.stopped_with = name
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.returncode = p.poll()
        return self.returncode

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def describe(self) -> dict:
        argv = list(self.argv)
        for i in range(1, len(argv)):  # never store a key given on the command line
            if argv[i - 1].startswith("--") and any(w in argv[i - 1].lower() for w in
                                                    ("key", "token", "secret", "password")):
                argv[i] = "<redacted>"
        return {"kind": self.spec.kind, "argv": argv, "cpus": self.spec.cpus, "base_url": self.base_url,
                "pid": self.proc.pid if self.proc else None, "startup_s": self.startup_s,
                "log": str(self.log_path), "info": self.info, "sut": self.sut}

    def __enter__(self) -> "ManagedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
