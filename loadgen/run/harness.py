"""The set-up and tear-down around every engine's load phase, written once: runner.Run (the
native engine, and its --procs parent inside it) and the Locust engine's CLI side
(engine/locust/run.py) call ``around``; only the ``load`` they pass differs.

    around(run, load) ─► rundir.claim (made and locked) ─► scenario.yaml (resolved; secrets
        redacted) ─► the target: a sweep's shared server | target.server started (managed.py,
        stopped on the way out; with server_traces the OTLP receiver first, a vLLM pointed at it,
        the spans joined after the load: run/server_traces.py) | target.url(s)
        ─► affinity: with target.server.cpus, loadgen on the remaining CPUs ─► load(placed): the
        engine's (readiness, probe, sut.json, power, /metrics, the measured phase, records.jsonl)
        ─► finish: meta.json (run.meta()) ─► device.json (calibration.freeze_device)
        ─► summary.json (rundir.defer_summary: not now after a big interrupted run) ─► the
        signal handlers as they were, the claim released

``run`` is a runner.Run, read here, never written: what the harness makes it returns as
values, as preflight returns TargetFacts: ``Placed`` (frozen: the base URL, the managed server,
the CPUs loadgen kept to) handed to ``load`` (Run keeps it: ``run.placed``), then meta.json's
``running_after`` and the summary in the ``RunResult`` (frozen). It reads run.sc, run_dir,
shared_server, writer, interrupted, crashed, hurry and meta() (meta.json).
"""
from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from loadgen.run import running_after, server_traces
from loadgen.run.calibration import freeze_device
from loadgen.run.meta import write_meta
from loadgen.run.rundir import claim, defer_summary, release, resolved_yaml, summarize_dir
from loadgen.run.storage import atomic_write_text
from loadgen.targets.managed import ManagedServer, ServerStartError


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    meta: dict
    summary: Optional[dict]
    interrupted: bool


@dataclass(frozen=True)
class Placed:
    """Where the load goes and what runs beside it: made by ``around`` before the load phase."""
    base_url: str                          # no trailing slash
    server: Optional[ManagedServer] = None  # a sweep's shared one or target.server's (managed.py)
    client_cpus: Optional[tuple] = None    # target.server.cpus' rest, loadgen's own


def around(run, load: Callable[[Placed], None]) -> RunResult:
    """The whole lifecycle of ``run`` with ``load(placed)`` as its load phase."""
    claim(run.run_dir)        # made and locked: a second run here at once gets exit 2
    atomic_write_text(run.run_dir / "scenario.yaml", resolved_yaml(run.sc))
    meta: dict = {}
    placed: Optional[Placed] = None
    after: Optional[dict] = None            # load.cancel's check (meta.json running_after)
    summary: Optional[dict] = None
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    first: Optional[BaseException] = None     # what ended the run, if it failed
    try:
        with contextlib.ExitStack() as stack:
            base_url, server = run.sc.target.primary_url, None   # target.urls: the first one's
            if run.shared_server is not None:
                if not run.shared_server.alive:
                    raise ServerStartError(
                        f"target.server: the shared server exited (code "
                        f"{run.shared_server.proc.poll()}; {run.shared_server.log_path})")
                server = run.shared_server
                base_url = server.base_url
            rx = stack.enter_context(server_traces.receiving(run))   # server_traces: OTLP
            if run.shared_server is None and run.sc.target.server is not None:
                server = stack.enter_context(ManagedServer(
                    server_traces.traced_spec(run.sc.target.server, rx), run.run_dir))
                base_url = server.base_url
            placed = Placed(base_url.rstrip("/"), server)
            cpus = stack.enter_context(affinity(server))
            if cpus:
                placed = Placed(placed.base_url, server, tuple(cpus))
            load(placed)
            after = running_after.after_load(run, placed.base_url)    # load.cancel
    except BaseException as e:
        first = e
        raise
    finally:
        try:
            meta, summary = finish(run, meta, placed, after)
        except OSError:     # a full disk: records.jsonl failed first, that is the error shown
            if first is None:
                raise
        for sig, handler in saved.items():   # the engine's signal handlers off
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, handler)
        release(run.run_dir)            # the claim (rundir.claim) ends with the run
    return RunResult(run.run_dir, meta, summary, bool(run.interrupted))


def finish(run, meta: dict, placed: Optional[Placed] = None,
           after: Optional[dict] = None) -> tuple[dict, Optional[dict]]:
    """meta.json, device.json, summary.json once the load began (records.jsonl opened);
    after a second signal (``hurry``) meta.json only. Returns (meta, summary or None)."""
    if run.writer is None:
        return meta, None
    meta = run.meta()
    meta["running_after"] = after          # load.cancel's check (its last key, as before)
    meta = write_meta(run.run_dir, meta)
    if run.hurry:
        return meta, None
    # After an interrupt, a run with more records than rundir.DEFER_SUMMARY_RECORDS is not
    # summarised on the spot (about 5 s of summarising on a 2-core box; 3.2M records took
    # minutes): `loadgen report RUN_DIR` computes summary.json and the report from what was kept.
    if defer_summary(run.run_dir, meta, run.interrupted) is not None:
        return meta, None                         # the first Ctrl-C stops in ~2 s
    own = placed is not None and placed.server is not None and run.shared_server is None
    meta["calibration"] = freeze_device(run.run_dir, own and not run.crashed)   # stopped by now
    meta = write_meta(run.run_dir, meta)                 # device.json written
    summary = None
    try:
        summary = summarize_dir(run.run_dir, meta, run.sc.output.report)
    except Exception:
        if not run.crashed:  # after a crash, the crash is the error to show
            raise
    return meta, summary


@contextlib.contextmanager
def affinity(server):
    """With target.server.cpus, run loadgen on the remaining CPUs for the run's length; yields
    them (empty: no pinning)."""
    cpus = server.spec.cpus if server is not None else None
    try:
        before = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        before = None
    rest = sorted(before - set(cpus)) if cpus and before else []
    if rest:
        os.sched_setaffinity(0, rest)
    try:
        yield rest
    finally:
        if rest:
            os.sched_setaffinity(0, before)

