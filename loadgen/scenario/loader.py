"""Scenario loading: defaults → the YAML file → each ``--set key.path=value``, one strict model.

    load_scenario(path, overrides) ─► yaml.safe_load ─► scenario_from_dict ─► Scenario
    scenario_from_dict(tree, overrides) ─► _set_path per override ─► Scenario.model_validate
    any problem ─► ScenarioError with one line naming the file and field (the CLI exits 2)
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml
from pydantic import ValidationError

from loadgen.scenario.model import Scenario
from loadgen.scenario.strict import ScenarioError


def _set_path(tree: dict, dotted: str, raw: str) -> None:
    keys = dotted.split(".")
    if not all(keys):
        raise ScenarioError(f"--set {dotted}={raw}: empty key in path")
    node = tree
    for k in keys[:-1]:
        nxt = node.get(k)
        if nxt is None:
            nxt = node[k] = {}
        if not isinstance(nxt, dict):
            raise ScenarioError(f"--set {dotted}: '{k}' is not a mapping")
        node = nxt
    try:
        node[keys[-1]] = yaml.safe_load(raw) if raw != "" else None
    except yaml.YAMLError:
        node[keys[-1]] = raw


def parse_overrides(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        if "=" not in item:
            raise ScenarioError(f"--set {item}: expected key.path=value")
        k, v = item.split("=", 1)
        out.append((k.strip(), v))
    return out


def format_validation_error(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{loc}: {msg}{more}" if loc else f"{msg}{more}"  # top-level messages name the field


def scenario_from_dict(tree: dict, overrides: list[str] = ()) -> Scenario:
    tree = copy.deepcopy(tree)  # overrides never leak into the caller's (nested) dicts
    for k, v in parse_overrides(list(overrides)):
        _set_path(tree, k, v)
    try:
        return Scenario.model_validate(tree)
    except ValidationError as e:
        raise ScenarioError(format_validation_error(e)) from None


def load_scenario(path: str | Path, overrides: list[str] = ()) -> Scenario:
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(f"{p}: no such scenario file")
    try:
        tree = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ScenarioError(f"{p}:{where} not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(tree, dict):
        raise ScenarioError(f"{p}: top level must be a mapping")
    try:
        return scenario_from_dict(tree, overrides)
    except ScenarioError as e:
        raise ScenarioError(f"{p}: {e}") from None
