"""The house, counted statically (no timing, nothing run): issue 37's "Done when" figures.

    loadgen/ analysis/ servers/ (every .py) ─► packages (a directory: its modules and lines),
        the largest modules, engine/locust + engine/procs lines
    the rules' names, grepped per module (comments and docstrings count: a module that names a
    rule is a module a change to the rule must read):
        hang-up     ``after_tokens|after_ms``                       loadgen/ outside scenario/
        redirect    ``Hops|MAX_HOPS|FOLLOWABLE|REDIRECTS|redirect_target|is_redirect``
                    (the hop state, its limit, the statuses)        loadgen/ outside scenario/
        load mode   ``mode ==|!=|in|not in`` (a branch on a mode)   loadgen/ outside scenario/
    Record construction sites: calls ``Record(...)`` (ast) in loadgen/ and analysis/;
    ``.get(`` in analysis/
    ─► a table on stdout, then one JSON line (``house {...}``): ``house(root)`` returns the dict

    python -m bench.house            (tests/bench/test_house.py asserts the issue's limits)
"""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("loadgen", "analysis", "servers")
RULES = {
    "hangup": re.compile(r"after_tokens|after_ms"),
    "redirect": re.compile(r"\b(Hops|MAX_HOPS|FOLLOWABLE|REDIRECTS|redirect_target|is_redirect)\b"),
    "load_mode": re.compile(r"\bmode\s*(==|!=|not\s+in\b|in\b)"),
}
LIMITS = {"hangup": 2, "redirect": 2, "load_mode": 3, "module_lines": 400,
          "locust_procs_lines": 2000}


def _lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _record_calls(text: str) -> int:
    if "Record(" not in text:            # most modules: no parse
        return 0
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return 0
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.Call)
               and getattr(n.func, "id", getattr(n.func, "attr", None)) == "Record")


def house(root: Path = ROOT) -> dict:
    """The figures of the tree at ``root`` (module doc)."""
    files = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
             for t in TREES for p in sorted((root / t).rglob("*.py"))}
    lines = {f: _lines(s) for f, s in files.items()}
    pkgs: dict = {}
    for f, n in lines.items():
        d = pkgs.setdefault(f.rsplit("/", 1)[0], [0, 0])
        d[0] += 1
        d[1] += n
    named = {k: sorted(f for f, s in files.items() if f.startswith("loadgen/")
                       and not f.startswith("loadgen/scenario/") and rx.search(s))
             for k, rx in RULES.items()}
    records = {f: c for f, s in files.items() if f.startswith(("loadgen/", "analysis/"))
               and (c := _record_calls(s))}
    largest = sorted(lines.items(), key=lambda kv: -kv[1])[:10]
    return {
        "packages": {p: {"modules": m, "lines": n} for p, (m, n) in sorted(pkgs.items())},
        "modules": len(lines), "lines": sum(lines.values()),
        "largest": [[f, n] for f, n in largest],
        "over_400": [f for f, n in lines.items() if n > LIMITS["module_lines"]],
        "locust_procs_lines": sum(n for f, n in lines.items() if f.startswith(
            ("loadgen/engine/locust/", "loadgen/engine/procs/"))),
        "rule_modules": named,
        "rule_counts": {k: len(v) for k, v in named.items()},
        "record_sites": sum(records.values()), "record_modules": sorted(records),
        "analysis_get": sum(s.count(".get(") for f, s in files.items()
                            if f.startswith("analysis/")),
    }


def main(argv=None, root: Path = ROOT) -> int:
    h = house(root)
    print(f"{'package':32s} {'modules':>7s} {'lines':>7s}")
    for p, d in h["packages"].items():
        print(f"{p:32s} {d['modules']:7d} {d['lines']:7,d}")
    print(f"{'(all)':32s} {h['modules']:7d} {h['lines']:7,d}\n\nlargest modules:")
    for f, n in h["largest"]:
        print(f"  {n:5d}  {f}")
    print(f"\nengine/locust + engine/procs: {h['locust_procs_lines']:,} lines "
          f"(limit {LIMITS['locust_procs_lines']:,})")
    for k, mods in h["rule_modules"].items():
        print(f"{k} named in {len(mods)} modules outside scenario/ (limit {LIMITS[k]}): "
              + ", ".join(mods))
    print(f"Record constructed at {h['record_sites']} sites ({', '.join(h['record_modules'])})")
    print(f".get( in analysis/: {h['analysis_get']:,}")
    print(f"modules over 400 lines: {len(h['over_400'])} {h['over_400']}")
    summary = {k: h[k] for k in ("modules", "lines", "locust_procs_lines", "rule_counts",
                                 "record_sites", "analysis_get")}
    summary["over_400"] = len(h["over_400"])
    print("house " + json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
