"""The set-up and tear-down around every engine's load phase, written once: runner.Run (the
native engine, and its --procs parent inside it) and the Locust engine's CLI side
(locust_engine/run.py) call ``around``; only the ``load`` they pass differs.

    around(run, load) ─► rundir.claim (made and locked) ─► scenario.yaml (resolved; secrets
        redacted) ─► server_traces (an OTLP receiver; spans joined after the load and the
        server's stop) ─► the target: a sweep's shared server | target.server started
        (managed.py, stopped on the way out; a vLLM one with the tracing flags) | target.url(s)
        ─► affinity: with target.server.cpus, loadgen on the remaining CPUs
        ─► load(base_url): the engine's (readiness, probe, sut.json,
        power, /metrics, the measured phase, records.jsonl) ─► finish: meta.json (run.meta())
        ─► device.json (calibration.freeze_device) ─► summary.json (rundir.defer_summary: not
        now after a big interrupted run) ─► the signal handlers as they were, the claim released

``run`` is a runner.Run: it holds the state these steps read and set (server, client_cpus,
writer, interrupted, crashed, hurry, summary, summary_deferred; meta() for meta.json).
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


@dataclass
class RunResult:
    run_dir: Path
    meta: dict
    summary: Optional[dict]
    interrupted: bool


def around(run, load: Callable[[str], None]) -> RunResult:
    """The whole lifecycle of ``run`` with ``load(base_url)`` as its load phase."""
    claim(run.run_dir)        # made and locked: a second run here at once gets exit 2
    atomic_write_text(run.run_dir / "scenario.yaml", resolved_yaml(run.sc))
    meta: dict = {}
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    first: Optional[BaseException] = None     # what ended the run, if it failed
    try:
        with contextlib.ExitStack() as stack:
            base_url = run.sc.target.primary_url          # target.urls: the first one's
            if run.shared_server is not None:
                if not run.shared_server.alive:
                    raise ServerStartError(
                        f"target.server: the shared server exited (code "
                        f"{run.shared_server.proc.poll()}; {run.shared_server.log_path})")
                run.server = run.shared_server
                base_url = run.server.base_url
            rx = stack.enter_context(server_traces.receiving(run))   # server_traces: OTLP
            if run.shared_server is None and run.sc.target.server is not None:
                run.server = stack.enter_context(ManagedServer(
                    server_traces.traced_spec(run.sc.target.server, rx), run.run_dir))
                base_url = run.server.base_url
            stack.enter_context(affinity(run))
            load(base_url.rstrip("/"))
            run.running_after = running_after.after_load(run, base_url.rstrip("/"))  # load.cancel
    except BaseException as e:
        first = e
        raise
    finally:
        try:
            meta = finish(run, meta)
        except OSError:     # a full disk: records.jsonl failed first, that is the error shown
            if first is None:
                raise
        for sig, handler in saved.items():   # the engine's signal handlers off
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, handler)
        release(run.run_dir)            # the claim (rundir.claim) ends with the run
    return RunResult(run.run_dir, meta, run.summary, bool(run.interrupted))


def finish(run, meta: dict) -> dict:
    """meta.json, device.json, summary.json once the load began (records.jsonl opened);
    after a second signal (``hurry``) meta.json only."""
    if run.writer is None:
        return meta
    meta = write_meta(run.run_dir, run.meta())
    if run.hurry:
        return meta
    # After an interrupt, a run with more records than rundir.DEFER_SUMMARY_RECORDS is not
    # summarised on the spot (about 5 s of summarising on a 2-core box; 3.2M records took
    # minutes): `loadgen report RUN_DIR` computes summary.json and the report from what was kept.
    run.summary_deferred = defer_summary(run.run_dir, meta, run.interrupted)
    if run.summary_deferred is not None:          # the first Ctrl-C stops in ~2 s
        return meta
    own = run.server is not None and run.shared_server is None  # stopped by now
    meta["calibration"] = freeze_device(run.run_dir, own and not run.crashed)
    meta = write_meta(run.run_dir, meta)                 # device.json written
    try:
        run.summary = summarize_dir(run.run_dir, meta, run.sc.output.report)
    except Exception:
        if not run.crashed:  # after a crash, the crash is the error to show
            raise
    return meta


@contextlib.contextmanager
def affinity(run):
    """With target.server.cpus, run loadgen on the remaining CPUs for the run's length."""
    cpus = run.server.spec.cpus if run.server is not None else None
    try:
        before = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        before = None
    rest = sorted(before - set(cpus)) if cpus and before else []
    if rest:
        os.sched_setaffinity(0, rest)
        run.client_cpus = rest
    try:
        yield
    finally:
        if rest:
            os.sched_setaffinity(0, before)

