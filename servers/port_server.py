"""Process helpers for the tests that start and stop servers."""
from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process on this host (a zombie, exited but not yet reaped,
    which still answers kill(0), is not). Also loadgen's (the Locust master's workers)."""
    try:
        with open(f"/proc/{pid}/stat") as f:        # "pid (comm) state ...": comm may hold ")"
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class PortServer:
    """A test server in its own interpreter: ``argv`` prints ``PORT <n>`` once it listens on
    127.0.0.1. ``with Sub(...) as s: s.url``; stopped with SIGTERM, then SIGKILL after 5 s."""

    label = "server"

    def __init__(self, argv: list, startup_timeout_s: float = 20.0):
        self.argv, self.startup_timeout_s = argv, startup_timeout_s
        self.proc = None
        self.port = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        import select
        import subprocess
        from pathlib import Path
        root = Path(__file__).resolve().parents[1]
        env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(self.argv, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], self.startup_timeout_s)
        line = self.proc.stdout.readline() if ready else ""   # "PORT n", or "" if it died
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"{self.label} did not start within {self.startup_timeout_s:g} s: "
                               f"{line!r}")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        import subprocess
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


async def serve_app(app, port: int = 0, handle_signals: bool = False) -> None:
    """Serve an aiohttp ``app`` on 127.0.0.1:``port``, print ``PORT <n>`` (what PortServer reads),
    and run until cancelled."""
    import asyncio

    from aiohttp import web
    runner = web.AppRunner(app, access_log=None, handle_signals=handle_signals)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    print(f"PORT {site._server.sockets[0].getsockname()[1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
