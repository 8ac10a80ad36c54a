"""The command line of a server (``python -m servers.jax``, ``python -m servers.calib``): parse, then
check what argparse cannot (``check_args(args) -> problem | None``), the same way for each."""
from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional, Sequence


def parse_checked(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]],
                  check_args: Callable[[argparse.Namespace], Optional[str]],
                  prog: str) -> tuple[Optional[argparse.Namespace], int]:
    """``(args, 0)``, or ``(None, exit status)``: 0 after --help, 2 for a bad flag (argparse has
    printed why) or a problem ``check_args`` names (printed here as ``PROG: error: ...``)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad flag (2, message already printed)
        return None, int(e.code or 0)
    problem = check_args(args)
    if problem is not None:
        sys.stderr.write(f"{prog}: error: {problem}\n")
        return None, 2
    return args, 0
