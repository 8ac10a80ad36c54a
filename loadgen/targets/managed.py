"""Managed servers: start the system under test, wait until healthy, always stop it.

    target.server (ServerSpec) ─► server_argv.build_argv (jax | vllm via servers.vllm | command;
                                  "{port}" filled)
        ─► Popen (own session, stdout+stderr ─► run_dir/server.log)
        ─► poll GET health_path until 200 (bounded by startup_timeout_s; exit or timeout
           ─► ServerStartError with the exit code and the log's tail); meanwhile a live line on
           stderr, ready.LiveLine: "starting jax server (23 s): <server.log's last line>"
        ─► GET /info (JSON describe of the SUT, if the server has one)
        ─► servers.vllm.describe.describe_server (flags, GPUs, vLLM version) ─► describe()["sut"]
        ─► stop: SIGINT, then SIGTERM, then SIGKILL, each with a timeout — on normal exit,
           exception and Ctrl-C alike (``with ManagedServer(...) as srv:``)
    each step ─► server_record.ServerRecord ─► run_dir/server.json (how it was started and
        stopped, or why it failed)

The child runs in its own session so a terminal Ctrl-C reaches loadgen only; loadgen then
finishes its records and stops the server itself.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from loadgen.scenario.model import ScenarioError
from loadgen.scenario.target import ServerSpec
from loadgen.targets.ready import LiveLine
from loadgen.targets.server_argv import ADDED_ENV, build_argv, server_env
from loadgen.targets.server_record import LIFECYCLE_FILE, ServerRecord, log_tail, shown_argv
from servers.vllm.describe import describe_server
from servers.vllm.launcher import Launcher, LaunchError, resolve_launcher


def _catch_ignored_sigint() -> bool:
    """A process started in the background of a script (``loadgen run ... &``) has SIGINT
    ignored, and an ignored signal stays ignored across exec: the server would then ignore the
    SIGINT that asks it to stop and only end at SIGTERM. While the server is spawned, SIGINT is
    caught instead (a caught signal is reset to its default in the child); True when it was
    ignored (the caller puts that back)."""
    try:
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            return False
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return True
    except ValueError:            # not the main thread: leave the disposition alone
        return False


class ServerStartError(RuntimeError):
    """The managed server exited or never became healthy; ``str()`` ends with the log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def tree_listens(pid: int, port: int) -> Optional[bool]:
    """True when ``pid`` or a descendant listens on TCP ``port``; False when none does; None
    when that cannot be told (psutil missing, access denied)."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    for p in procs:
        try:
            conns = p.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        except psutil.Error:
            return None
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
               for c in conns):
            return True
    return False


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def last_log_line(path: Path, limit: int = 120) -> str:
    """The last non-empty line of a log (its tail only is read; a progress bar's \r-rewritten
    line: its last state; colour codes dropped), cut to ``limit`` characters."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    for line in reversed(tail.split("\n")):
        for part in reversed(line.split("\r")):
            text = " ".join(_ANSI.sub("", part).split())
            if text:
                return text if len(text) <= limit else text[:limit - 1] + "…"
    return ""


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


class ManagedServer:
    """Context manager around one server process. Attributes once entered: ``base_url``,
    ``port``, ``argv``, ``info`` (GET /info JSON or None), ``startup_s``, ``returncode``,
    ``lifecycle`` (what server.json holds)."""

    def __init__(self, spec: ServerSpec, run_dir: str | Path, poll_s: float = 0.25,
                 stop_timeouts_s: tuple[float, float, float] = (10.0, 5.0, 5.0)):
        self.spec = spec
        self.poll_s = poll_s
        self.stop_timeouts_s = stop_timeouts_s
        self.port = spec.port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.record = ServerRecord(spec, run_dir, self.base_url, {**ADDED_ENV, **spec.env})
        self.log_path = self.record.log_path
        self.lifecycle = self.record.data
        self.proc: Optional[subprocess.Popen] = None
        self.info: Optional[dict] = None
        self.sut: Optional[dict] = None
        self.startup_s: Optional[float] = None
        self.returncode: Optional[int] = None
        self.stopped_with: Optional[str] = None
        self.launch: Optional[Launcher] = None
        try:
            if spec.kind == "vllm":
                try:
                    self.launch = resolve_launcher(spec.executable, server_env(spec))
                except LaunchError as e:
                    raise ScenarioError(str(e)) from None
                self.lifecycle["launch"] = self.launch.describe()
            self.argv = build_argv(spec, self.port, self.launch)
        except ScenarioError as e:   # nothing started: the record says what was asked and why
            self.record.failed(str(e), status="not_started")
            raise
        self.lifecycle["argv"] = shown_argv(self.argv, self.launch)

    def start(self) -> "ManagedServer":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        env = server_env(self.spec)
        t = time.monotonic()
        cpus = self.spec.cpus
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        self.lifecycle.update(status="starting", started_at_unix=time.time())
        ignored = _catch_ignored_sigint()
        try:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True, preexec_fn=pin)
        except OSError as e:
            msg = f"target.server: cannot start {self.argv[0]}: {e}"
            log.write(f"[loadgen] {msg}\n".encode())
            log.close()
            self.record.failed(msg)
            raise ServerStartError(msg) from None
        finally:
            if ignored:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        log.close()  # the child holds its own descriptor
        self.lifecycle["pid"] = self.proc.pid
        self.record.write()
        try:  # __exit__ never runs when __enter__ raises: stop the child here, whatever raised
            try:
                self._wait_healthy(t)
            except ServerStartError as e:
                self.returncode = self.proc.poll()
                self.record.failed(str(e).split("\n", 1)[0], with_log=True)
                raise ServerStartError(str(e) + self.record.hint_text()) from None
            except BaseException as e:     # Ctrl-C while waiting: still recorded
                self.record.failed(f"start-up interrupted ({type(e).__name__})", with_log=True)
                raise
            self.startup_s = time.monotonic() - t
            self.lifecycle.update(status="healthy", healthy_at_unix=time.time(),
                                  startup_s=round(self.startup_s, 3))
            self.record.write()
            self.info = self._fetch_info()
            try:  # flags, GPUs, vLLM version: every probe bounded, "unavailable" when it cannot say
                self.sut = describe_server(self.spec, self.argv, self.base_url, self.launch, env)
            except Exception as e:
                self.sut = {"status": "unavailable", "reason": f"{type(e).__name__}: {e}"}
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, t_start: float) -> None:
        live = LiveLine(f"starting {self.spec.kind} server")
        try:
            self._poll_health(t_start, live)
        finally:
            live.close()

    def _poll_health(self, t_start: float, live: LiveLine) -> None:
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
                if status == 200 and self._port_is_ours():
                    return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                warn = self.lifecycle.get("port_warning")
                raise ServerStartError(
                    f"target.server.startup_timeout_s: {url} not healthy after "
                    f"{self.spec.startup_timeout_s:g} s" + (f" ({warn})" if warn else "")
                    + f" ({self.log_path}):\n{log_tail(self.log_path)}")
            live.update(lambda: last_log_line(self.log_path))
            time.sleep(self.poll_s)

    def _port_is_ours(self) -> bool:
        """Whether the /health answer came from our server: the free port was released before
        the server bound it, so another process may hold it meanwhile (seen on a busy host: a
        test's server answered while vLLM was still importing torch). jax and vllm listen in
        their own process tree; a kind: command server may listen through a proxy (docker), so
        there a foreign listener is only recorded. Unknown (no psutil, no access): accepted."""
        ours = tree_listens(self.proc.pid, self.port)
        if ours is False:
            self.lifecycle["port_warning"] = (
                f"port {self.port} answered {self.spec.health_path} but no process started by "
                "loadgen listens on it")
            if self.spec.kind in ("jax", "vllm"):
                return False
        return True

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
        if self.lifecycle.get("stop") is not None:
            return self.returncode
        t, sent = time.monotonic(), []
        stop: dict = {"requested_at_unix": time.time(), "exited_before_stop": p.poll() is not None,
                      "signals_sent": sent, "signal": None}
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
                sent.append(name)
                try:
                    p.wait(timeout=wait)
                    self.stopped_with = name
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.returncode = p.poll()
        stop.update(signal=self.stopped_with, exit_code=self.returncode,
                    stopped_at_unix=time.time(), stop_s=round(time.monotonic() - t, 3),
                    exit_signal=(signal.Signals(-self.returncode).name
                                 if self.returncode is not None and self.returncode < 0
                                 and -self.returncode in signal.valid_signals() else None))
        self.lifecycle["stop"] = stop
        if self.lifecycle["status"] in ("healthy", "starting"):
            self.lifecycle["status"] = "stopped"
        self.record.write()
        return self.returncode

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def describe(self) -> dict:
        return {"kind": self.spec.kind, "argv": shown_argv(self.argv, self.launch), "cpus": self.spec.cpus,
                "base_url": self.base_url, "executable": self.spec.executable,
                "env_added": self.lifecycle["env_added"],
                "pid": self.proc.pid if self.proc else None, "startup_s": self.startup_s,
                "log": str(self.log_path), "lifecycle_file": LIFECYCLE_FILE,
                "info": self.info, "sut": self.sut}

    def __enter__(self) -> "ManagedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
