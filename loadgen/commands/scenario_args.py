"""The arguments every scenario-running sub-command (``run``, ``sweep``) takes first: the scenario
file, ``--set KEY.PATH=VALUE`` overrides (``args.overrides``) and ``--json``."""
from __future__ import annotations

import argparse


def add_scenario_args(p: argparse.ArgumentParser, *, scenario_help: str, set_help: str,
                      json_help: str) -> None:
    p.add_argument("scenario", help=scenario_help)
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY.PATH=VALUE", help=set_help)
    p.add_argument("--json", action="store_true", help=json_help)
