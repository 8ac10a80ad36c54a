"""What ``loadgen run --engine locust`` calls (loadgen/commands/run.py; its flags are checked by
run/engines.check_flags): run_from_cli runs LocustRun, or for ``--worker`` one worker joined to
--master-host H, its records forwarded to the master's run directory."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Optional

from loadgen.engine.locust.run import LocustOptions, _argv, _spawn


def run_worker(opts: LocustOptions, master_host: str, records_dir: Optional[str] = None) -> int:
    """``--worker``: one Locust worker joined to ``master_host``; its records travel to the
    master (and stay in ``records_dir`` here as a copy). Returns its exit code."""
    d = Path(records_dir or f"loadgen-locust-worker-{os.getpid()}")
    d.mkdir(parents=True, exist_ok=True)
    argv = _argv("worker", opts, "--records-dir", str(d), "--master-host", master_host,
                 "--master-port", str(opts.master_port), "--forward")
    p = _spawn(argv, d / "worker.log")
    print(f"loadgen: locust worker joining {master_host}:{opts.master_port}; its records and "
          f"log: {d}", file=sys.stderr)
    try:
        return p.proc.wait()
    except KeyboardInterrupt:
        p.reap(terminate=True)
        return 130


def run_from_cli(sc, args, progress, live=None):
    """``loadgen run --engine locust ...``: a RunResult, or an exit code for ``--worker``.
    ``live``: the --metrics-port exporter (loadgen.live), pointed at this run's directory."""
    if importlib.util.find_spec("locust") is None:
        print("loadgen: error: --engine locust needs the locust package "
              "(pip install 'loadgen[locust]')", file=sys.stderr)
        return 2
    opts = LocustOptions(workers=args.workers, master=args.master, master_port=args.master_port,
                         scenario_path=args.scenario, overrides=list(args.overrides))
    if args.worker:
        return run_worker(opts, args.master_host)
    from loadgen.engine.locust.run import LocustRun
    run = LocustRun(sc, opts, progress)
    if live is not None:            # the workers' ledgers and the progress counters (flags.py)
        live.follow(run.prep.run_dir, progress)
    return run.execute()        # meta.crashed: printed by commands/run.py, as for every engine
