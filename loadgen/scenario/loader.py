"""Scenario loading: defaults → the YAML file → each ``--set key.path=value``, one strict model.

    load_scenario(path, overrides) ─► yaml12.load ─► scenario_from_dict ─► Scenario
    (YAML 1.2 core, analysis.contract.yaml12: on/off/yes/no are strings, only true/false are
    booleans; a --set value is read the same way)
    scenario_from_dict(tree, overrides) ─► _set_path per override ─► check_tree_size
                                        ─► Scenario.model_validate
    check_tree_size: an alias bomb (anchors that expand to millions of values) or a cycle is
    refused in time linear in the DISTINCT values, before anything expands it
    any problem ─► ScenarioError with one line naming the file and field (the CLI exits 2)
"""
from __future__ import annotations

import copy
from pathlib import Path

from pydantic import ValidationError

from analysis.contract import yaml12
from loadgen.scenario.limits import MAX_SCENARIO_DEPTH, MAX_SCENARIO_VALUES
from loadgen.scenario.model import Scenario
from loadgen.scenario.strict import ScenarioError, unknown_key


def check_tree_size(tree) -> None:
    """Refuse a tree (parsed YAML) that expands to more than MAX_SCENARIO_VALUES values, nests
    deeper than MAX_SCENARIO_DEPTH, or contains itself. Shared sub-trees (YAML aliases) are
    sized once, so a billion-laughs bomb costs what its text costs."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[object, bool]] = [(tree, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        kids = list(node.values()) if isinstance(node, dict) else node
        containers = [k for k in kids if isinstance(k, (dict, list))]
        if done:
            open_.discard(id(node))
            size[id(node)] = 1 + len(kids) - len(containers) + sum(size[id(k)] for k in containers)
            depth[id(node)] = 1 + max((depth[id(k)] for k in containers), default=0)
            if size[id(node)] > MAX_SCENARIO_VALUES:
                raise ScenarioError(f"the scenario expands to more than {MAX_SCENARIO_VALUES:,} "
                                    "values (YAML aliases/anchors?): refused")
            if depth[id(node)] > MAX_SCENARIO_DEPTH:
                raise ScenarioError(f"the scenario nests deeper than {MAX_SCENARIO_DEPTH} levels")
            continue
        if id(node) in size:
            continue
        if id(node) in open_:
            raise ScenarioError("the scenario contains itself (a recursive YAML alias)")
        open_.add(id(node))
        stack.append((node, True))
        stack.extend((k, False) for k in containers if id(k) not in size)


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
        node[keys[-1]] = yaml12.load(raw) if raw != "" else None
    except (yaml12.YAMLError, RecursionError):
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
    errors = err.errors()          # an unknown key first: a typo explains a "missing" field
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = unknown_key(Scenario, tuple(first["loc"]))
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{loc}: {msg}{more}" if loc else f"{msg}{more}"  # top-level messages name the field


def scenario_from_dict(tree: dict, overrides: list[str] = ()) -> Scenario:
    check_tree_size(tree)
    tree = copy.deepcopy(tree)  # overrides never leak into the caller's (nested) dicts
    for k, v in parse_overrides(list(overrides)):
        _set_path(tree, k, v)
    check_tree_size(tree)
    try:
        return Scenario.model_validate(tree)
    except ValidationError as e:
        raise ScenarioError(format_validation_error(e)) from None


def load_scenario(path: str | Path, overrides: list[str] = ()) -> Scenario:
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(f"{p}: no such scenario file")
    try:
        tree = yaml12.load(p.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{p}: not valid UTF-8 (byte {e.start})") from None
    except RecursionError:
        raise ScenarioError(f"{p}: nests too deep to read") from None
    except yaml12.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ScenarioError(f"{p}:{where} not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(tree, dict):
        raise ScenarioError(f"{p}: top level must be a mapping")
    try:
        return scenario_from_dict(tree, overrides)
    except ScenarioError as e:
        raise ScenarioError(f"{p}: {e}") from None
