"""children: the supervisor of the sender processes a run's parent starts — a ``--procs`` run's
(engine/procs/parent.py: N x ``python -m loadgen.engine.procs.child``) and the Locust engine's
(engine/locust/run.py: the master or local process, and its local workers). One rule set:

    Child(argv, log)       spawned with its log (stdout and stderr), the children's environment
                           (child_env); a Job on its stdin if asked; its own session if asked (a
                           terminal Ctrl-C then reaches only the parent, which passes it on)
    Children.forward(stop) the parent's first signal (runner.Run.stop) passed on once: SIGTERM
    Children.ended()       children that exited since the last look, each once (a dead one stops
                           the others: the caller says how)
    Children.supervise()   the run's body; any exception (a second signal, a bug): every child
                           SIGKILLed at once; then, always, the caller's finish (reap, merge)
    Child.reap(grace)      wait (after SIGTERM if asked) ``grace`` s, then SIGKILL and wait

No loop of its own (the caller's asyncio sleeps), no gevent. Imports loadgen.child_env only.
"""
from __future__ import annotations

import contextlib
import signal
import subprocess

from loadgen.child_env import child_env

KILL_GRACE_S = 10.0          # after the run: SIGKILL whoever is still there


class Child:
    """One child process: its Popen (``proc``), a line or bytes on its stdin, signals, reaping."""

    def __init__(self, argv: list[str], log, stdin: bool = False, new_session: bool = False):
        with open(log, "ab") as f:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else None, stdout=f,
                                         stderr=subprocess.STDOUT, env=child_env(),
                                         close_fds=True, start_new_session=new_session)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def say(self, data) -> None:
        """``data`` (bytes, or a line: "go T0", "stop REASON") on the child's stdin."""
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write(data if isinstance(data, bytes) else f"{data}\n".encode())
            self.proc.stdin.flush()

    def signal(self, sig: int) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def how_it_ended(self) -> str:
        rc = self.proc.returncode
        if rc is None or rc >= 0:
            return "still running" if rc is None else f"exited with code {rc}"
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-rc).name}"
        return f"was killed by signal {-rc}"

    def reap(self, grace_s: float = KILL_GRACE_S, terminate: bool = False) -> int:
        """Its exit code: waited for ``grace_s`` (SIGTERM first if ``terminate``), then SIGKILL."""
        if terminate:
            self.signal(signal.SIGTERM)
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        return self.proc.returncode


class Children(list):
    """The parent's children (a list of Child) and the rules it applies to all of them."""

    def __init__(self):
        super().__init__()
        self.forwarded = False
        self._seen: set[int] = set()

    def forward(self, stop, to=None) -> None:
        """Once ``stop`` (the parent's first signal) is set: SIGTERM to ``to`` (all), once."""
        if stop.is_set() and not self.forwarded:
            self.forwarded = True
            for c in (self if to is None else to):
                c.signal(signal.SIGTERM)

    def ended(self) -> list[tuple[int, Child]]:
        """(index, child) of the children that exited since the last call, each once."""
        out = [(i, c) for i, c in enumerate(self) if i not in self._seen and not c.alive]
        self._seen.update(i for i, _ in out)
        return out

    async def supervise(self, body, finish, aborted=None) -> None:
        """``await body()``; on any exception ``aborted(e)`` and every child SIGKILLed before
        it propagates; ``finish()`` always (the children reaped, their parts merged)."""
        try:
            await body()
        except BaseException as e:
            if aborted is not None:
                aborted(e)
            for c in self:
                c.signal(signal.SIGKILL)
            raise
        finally:
            finish()
