"""The ``loadgen`` command line: one parser, one subcommand module each.

    loadgen [--version] COMMAND ...
        run SCENARIO [--set k.path=v ...] [--json]   loadgen/commands/run.py ─► runner.py
            [--procs N|auto]                        (N sender processes: engine/procs/)
            [--dry-run]                             = validate
        validate SCENARIO [--set ...] [--json]       loadgen/commands/validate.py: the plan, nothing sent
        sweep SCENARIO                               loadgen/commands/sweep.py ─► sweep.py
        report RUN_DIR                               loadgen/commands/report.py ─► analysis/
        export RUN_DIR --jsonl [--out F] [--force]   loadgen/commands/export.py: records.arrow ─► JSONL
        serve | kernel | calibrate                   loadgen/commands/{serve,kernel,calibrate}.py

Each ``loadgen/commands/<name>.py`` exposes ``register(subparsers)`` (sets ``func``) and
``main(args) -> int``. User errors (``ScenarioError``, a server that will not start) print one
line ``loadgen: error: ...`` and exit 2 (1 for a server failure, or a disk that failed mid-run:
``loadgen.run.storage.StorageError``); Ctrl-C exits 130.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from typing import Optional

from loadgen import __version__
from loadgen.scenario.model import ScenarioError

COMMANDS = ("run", "validate", "sweep", "report", "export", "compare", "serve", "kernel",
            "calibrate", "predict")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="loadgen", description="Measure LLM inference servers: TTFT, TPOT/ITL, goodput "
        "under SLOs, energy, MLPerf-style Offline and Server scenarios.")
    ap.add_argument("--version", action="version", version=f"loadgen {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:   # an import error here is a bug in loadgen: it must show, not hide
        importlib.import_module(f"loadgen.commands.{name}").register(sub)
    return ap


def _error(msg: str) -> None:
    """THE one-line error: secrets redacted, then made one line (analysis.text.one_line: a model
    name or a server's text with a newline or an escape sequence cannot break it; bounded)."""
    from analysis.text import one_line
    from loadgen.redact import redact
    print(f"loadgen: error: {one_line(redact(str(msg)))}", file=sys.stderr)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser()
    args = ap.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        ap.print_help(sys.stderr)
        return 2
    try:
        return int(func(args) or 0)
    except ScenarioError as e:
        _error(str(e))
        return 2
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as e:
        managed = sys.modules.get("loadgen.targets.managed")    # (not imported: not raised;
        if managed is not None and isinstance(e, managed.ServerStartError):   # report needs no
            _error(str(e))                                      # aiohttp)
            return 1
        from loadgen.run.storage import STORAGE_ERRNOS, StorageError
        if isinstance(e, StorageError) or (isinstance(e, OSError) and e.errno in STORAGE_ERRNOS):
            # the disk failed (full, read-only, I/O error): one line, records kept to the last
            # whole line; not a bug in loadgen
            _error(str(e) if isinstance(e, StorageError) else
                   f"{e.filename or 'a run file'}: could not be written ({e.strerror})")
            return 1
        traceback.print_exc()
        _error("unexpected failure (a bug in loadgen, not in your input): please report it "
               "with the traceback above")
        return 1


if __name__ == "__main__":
    sys.exit(main())
