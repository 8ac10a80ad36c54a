"""Checks of documented text: a YAML block loads as a scenario (or a fragment of one), a shell
command is what this repository's tools accept. Each check returns the problems it found ([]: fine).

    YAML document (text) ─► has target AND load? ─ yes ─► as written ─────────────────┐
                                                 └ no ──► BASE's other keys + the text ─┴► a file
        ─► load_scenario ─► build_workload (the files it names are read and checked)
        ─► api.api_key_env's variable is set
    argv ─► loadgen: loadgen's own argparse parser; run/sweep: the scenario file exists and loads
                     with the --set overrides (as above)
            python/python3 -m MOD: the module is found;  pip install -e . / '.[x]' / 'loadgen[x]':
            the extra exists;  pytest PATH: the path exists;  anything else: not checkable here
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
from pathlib import Path
from typing import Optional

from tests.docs.blocks import ROOT

# what a fragment (a few keys) is merged onto: its own top-level keys replace these
BASE = {"name": "docs-fragment", "target": {"url": "http://127.0.0.1:8000"},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 2}}


def is_complete(doc: dict) -> bool:
    return "target" in doc and "load" in doc


def documents(text: str) -> list[str]:
    """The YAML documents of a block's text (split at ``---`` lines), dedented."""
    import textwrap
    docs, cur = [], []
    for ln in textwrap.dedent(text).splitlines():
        if ln.strip() == "---":
            docs.append("\n".join(cur))
            cur = []
        else:
            cur.append(ln)
    docs.append("\n".join(cur))
    return [d + "\n" for d in docs if any(ln.split("#")[0].strip() for ln in d.splitlines())]


def as_scenario_text(doc: str) -> str:
    """A complete scenario as written; a fragment with BASE's top-level keys it lacks put first
    (as YAML text, so the fragment's own text is read by the scenario loader unchanged)."""
    from analysis.contract import yaml12
    tree = yaml12.load(doc)
    if not isinstance(tree, dict):
        raise ValueError("not a mapping")
    if is_complete(tree):
        return doc
    return yaml12.dump({k: v for k, v in BASE.items() if k not in tree}, sort_keys=False) + doc


def check_scenario(path: Path, overrides=()) -> list[str]:
    """The scenario file loads with load_scenario (and ``--set`` overrides); its workload is
    built (the files it names are read and checked) and its API key variable is set."""
    from loadgen.scenario.loader import load_scenario
    from loadgen.scenario.strict import ScenarioError
    from loadgen.scenario.workload import build_workload
    try:
        sc = load_scenario(path, list(overrides))
        build_workload(sc.workload)
    except ScenarioError as e:
        return [str(e)]
    name = sc.api.api_key_env        # what `loadgen run` refuses (loadgen.run.rundir.api_key)
    if name and not os.environ.get(name):
        return [f"api.api_key_env: environment variable {name} is not set"]
    return []


def check_scenario_text(doc: str, tmp: Path) -> list[str]:
    """One documented YAML document (a complete scenario or a fragment), through a file."""
    f = tmp / "scenario.yaml"
    f.write_text(as_scenario_text(doc), encoding="utf-8")
    return [p.replace(str(f), "(the block)") for p in check_scenario(f)]


def check_scenario_file(path: str, overrides, tmp: Path) -> list[str]:
    p = ROOT / path
    if not p.is_file():
        return [f"{path}: no such scenario file"]
    return check_scenario(Path(path), overrides)


def _loadgen(argv: list[str], tmp: Path) -> list[str]:
    from loadgen.cli import build_parser
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = build_parser().parse_args(argv[1:])
    except SystemExit as e:
        return [] if e.code == 0 else [f"loadgen's parser refuses it: {err.getvalue().strip()}"]
    if args.command in ("run", "sweep"):
        problems = check_scenario_file(args.scenario, args.overrides, tmp)
        if args.command == "run" and not problems:
            from loadgen.run.engines import check_flags
            bad = check_flags(args.engine, args.workers, args.master, args.worker, args.master_host)
            problems = [bad] if bad else []
        return problems
    return []


def _extras() -> set[str]:
    import tomllib                  # Python 3.11+
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(meta.get("optional-dependencies", {}))


def _pip(argv: list[str]) -> Optional[list[str]]:
    if len(argv) < 2 or argv[1] != "install":
        return None
    own = [a for a in argv[2:] if re.fullmatch(r"(\.|loadgen)(\[[\w,-]+\])?", a)]
    if not own:
        return None
    out = []
    for a in own:
        m = re.search(r"\[([\w,-]+)\]", a)
        out += [f"pip install {a}: no extra '{x}' in pyproject.toml"
                for x in (m.group(1).split(",") if m else []) if x not in _extras()]
    return out


def check_command(argv: list[str], tmp: Path) -> Optional[list[str]]:
    """The problems of one documented command, or None when nothing here can check it."""
    exe = os.path.basename(argv[0])
    if argv[0] == "loadgen":
        return _loadgen(argv, tmp)
    if argv[0] in ("python", "python3") and len(argv) > 2 and argv[1] == "-m":
        mod = argv[2]
        return [] if importlib.util.find_spec(mod) is not None else [f"no module {mod}"]
    if exe in ("pip", "pip3") and argv[0] == exe:
        return _pip(argv)
    if argv[0] == "pytest":
        paths = [a.split("::")[0] for a in argv[1:] if not a.startswith("-")]
        return [f"pytest {p}: no such path" for p in paths if not (ROOT / p).exists()]
    return None
