"""The exporter process as ``loadgen run`` drives it: bind, spawn, follow each run, stop.

    LiveExporter.open(port, host)
        ─► socket bound and listening HERE (a port in use fails at once: LiveError, no child)
        ─► feed.Mirror (the progress counters' file and its copying thread)
        ─► ``python -m loadgen.live.exporter --fd N --feed PATH`` (the socket inherited, ours
           closed) ─► waits for its "ready" line (READY_S at most)
    follow(run_dir, progress) ─► {"follow": run_dir} on its stdin; the mirror points at progress
    close() ─► {"stop": true}, stdin closed, wait STOP_S, then SIGKILL; mirror removed.
               After close() the port is free. Also on interrupt (the caller's finally) and when
               this process dies (the child sees EOF on stdin and exits).
"""
from __future__ import annotations

import contextlib
import json
import select
import socket
import subprocess
import sys

from loadgen.child_env import child_env
from loadgen.live.feed import Mirror

READY_S = 60.0           # a loaded host can take a while to import prometheus_client and numpy
STOP_S = 5.0


class LiveError(Exception):
    """The port cannot be served (in use, not permitted, a bad host) or the process failed."""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (SO_REUSEADDR: a port left in TIME_WAIT is usable,
    one that another process listens on is not)."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as e:
        raise LiveError(f"host {host!r} not resolvable ({e})") from None
    s = socket.socket(family, kind, proto)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
        s.listen(128)
    except OSError as e:
        s.close()
        raise LiveError(f"cannot listen on {host}:{port} ({e.strerror or e})") from None
    return s


class LiveExporter:
    """``with LiveExporter.open(port) as ex: ex.follow(run_dir, progress); ...``"""

    def __init__(self, proc: subprocess.Popen, mirror: Mirror, host: str, port: int):
        self.proc, self.mirror, self.host, self.port = proc, mirror, host, port

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}/metrics"

    @classmethod
    def open(cls, port: int, host: str = "127.0.0.1") -> "LiveExporter":
        sock = bind(host, port)
        mirror = Mirror()
        env = child_env()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "loadgen.live.exporter", "--fd", str(sock.fileno()),
                 "--feed", str(mirror.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env=env, pass_fds=(sock.fileno(),))
        except OSError as e:
            mirror.close()
            raise LiveError(f"the exporter process did not start ({e})") from None
        finally:
            sock.close()                # the child holds the port now; it frees it when it ends
        ex = cls(proc, mirror, host, port)
        ready, _, _ = select.select([proc.stdout], [], [], READY_S)
        line = proc.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            ex.close()
            raise LiveError(f"the exporter process did not start (exit code {proc.poll()})")
        return ex

    def _say(self, cmd: dict) -> bool:
        try:
            self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def follow(self, run_dir, progress) -> None:
        """From now on: ``run_dir``'s records and ``progress``'s counters (one run)."""
        self.mirror.point(progress)
        self._say({"follow": str(run_dir)})

    def close(self) -> None:
        """Stop serving: the process ends and the port is free when this returns."""
        if self.proc.poll() is None:
            self._say({"stop": True})
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.close()
            try:
                self.proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                f.close()
        self.mirror.close()

    def __enter__(self) -> "LiveExporter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
