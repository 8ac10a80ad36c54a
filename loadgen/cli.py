"""The ``loadgen`` command line: one parser, one subcommand module each.

    loadgen [--version] COMMAND ...
        run SCENARIO [--set k.path=v ...] [--json]   loadgen/commands/run.py ─► runner.py
        sweep SCENARIO                               loadgen/commands/sweep.py ─► sweep.py
        report RUN_DIR                               loadgen/commands/report.py ─► analysis/
        serve | kernel | calibrate                   loadgen/commands/{serve,kernel,calibrate}.py

Each ``loadgen/commands/<name>.py`` exposes ``register(subparsers)`` (sets ``func``) and
``main(args) -> int``. User errors (``ScenarioError``, a server that will not start) print one
line ``loadgen: error: ...`` and exit 2 (1 for a server failure); Ctrl-C exits 130.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from typing import Optional

from loadgen import __version__
from loadgen.scenario.model import ScenarioError

COMMANDS = ("run", "sweep", "report", "compare", "serve", "kernel", "calibrate")


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, str]]:
    ap = argparse.ArgumentParser(
        prog="loadgen", description="Measure LLM inference servers: TTFT, TPOT/ITL, goodput "
        "under SLOs, energy, MLPerf-style Offline and Server scenarios.")
    ap.add_argument("--version", action="version", version=f"loadgen {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    missing: dict[str, str] = {}
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"loadgen.commands.{name}")
        except ImportError as e:  # one broken command must not take the others down
            missing[name] = f"{type(e).__name__}: {e}"
            continue
        mod.register(sub)
    return ap, missing


def _error(msg: str) -> None:
    print(f"loadgen: error: {msg}", file=sys.stderr)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap, missing = build_parser()
    if argv and argv[0] in missing:
        _error(f"command '{argv[0]}' is unavailable here ({missing[argv[0]]})")
        return 2
    args = ap.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        ap.print_help(sys.stderr)
        return 2
    from loadgen.targets.managed import ServerStartError
    try:
        return int(func(args) or 0)
    except ScenarioError as e:
        _error(str(e))
        return 2
    except ServerStartError as e:
        _error(str(e))
        return 1
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except Exception:
        traceback.print_exc()
        _error("unexpected failure (a bug in loadgen, not in your input): please report it "
               "with the traceback above")
        return 1


if __name__ == "__main__":
    sys.exit(main())
