"""The arguments every scenario-running sub-command (``run``, ``sweep``) takes first: the scenario
file, ``--set KEY.PATH=VALUE`` overrides (``args.overrides``) and ``--json``; and the two that
the measuring ones (``run``, ``sweep``) share: ``--fail-on-invalid`` and ``--repeat N``."""
from __future__ import annotations

import argparse


def add_scenario_args(p: argparse.ArgumentParser, *, scenario_help: str, set_help: str,
                      json_help: str) -> None:
    p.add_argument("scenario", help=scenario_help)
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY.PATH=VALUE", help=set_help)
    p.add_argument("--json", action="store_true", help=json_help)


def add_measure_args(p: argparse.ArgumentParser, *, fail_help: str, repeat_help: str) -> None:
    p.add_argument("--fail-on-invalid", action="store_true", help=fail_help)
    p.add_argument("--repeat", type=int, default=1, metavar="N", help=repeat_help)
