"""Every module path docs/architecture.md names exists in the tree, read at test time (no list here).

    docs/architecture.md ─► names() ─► (where, name, the package it is named under) ─► resolve() ─► missing ones

What counts as a name: a word ending in ``.py`` (``pool.py``, ``wire/exchange.py``,
``loadgen/run/meta.py``) or a path ending in ``/`` that starts at a top-level directory of the
repository (``loadgen/engine/core/``). How it is found:
  * rooted (``loadgen/…``, ``analysis/…``, ``tests/…``): that exact path;
  * in the Layout tree, a name in a package's row or its continuation lines is relative to that
    package (the left column's indentation nests them): ``metrics/  slo.py`` is
    ``analysis/metrics/slo.py``; a bare name may sit in a sub-package of it (``wire/ (pool.py …)``),
    a path with a ``/`` (``run/meta.py``) anywhere in the tree;
  * elsewhere in the doc: a bare ``x.py`` some file of that name, ``a/x.py`` some file ending so.
Globs (``*.yaml``) and URLs are not names.
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
LEFT = 35                          # the Layout tree's left column (the package names)
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache"}

_PY = re.compile(r"(?<![\w./*:-])((?:[A-Za-z_][\w-]*/)*[A-Za-z_]\w*\.py)(?![\w/*])")
_DIR = re.compile(r"(?<![\w./*:-])((?:[A-Za-z_][\w-]*/)+)(?![\w*.])")


@lru_cache(maxsize=None)
def tree(root: Path = ROOT) -> tuple[str, ...]:
    """Every file and directory under root, as a '/'-joined relative path (directories end in /)."""
    out = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        rel = Path(here).relative_to(root).as_posix()
        pre = "" if rel == "." else rel + "/"
        out += [pre + d + "/" for d in dirs] + [pre + f for f in files]
    return tuple(out)


def _top_dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}


def tokens(text: str) -> list[str]:
    """The names a piece of text holds: ``.py`` names, and paths ending in ``/``."""
    found = [(m.start(), m.group(1)) for rx in (_PY, _DIR) for m in rx.finditer(text)]
    return [t for _, t in sorted(found)]


def names(doc: str) -> list[tuple[int, str, str]]:
    """(line number, name, where it is named: '' outside the Layout tree, else the row's package and
    the folders the row names before it, ``|``-joined: ``servers/hostile/ (server.py, cases.py)``)."""
    out = []
    in_layout = in_block = False
    stack: list[str] = []
    pkg = ""
    for i, line in enumerate(doc.splitlines(), 1):
        if line.startswith("## "):
            in_layout = line.strip() == "## Layout"
            stack, pkg = [], ""
        if line.startswith("```"):
            in_block = not in_block
            continue
        if not (in_layout and in_block):
            out += [(i, t, "") for t in tokens(line)]
            continue
        left, right = line[:LEFT], line[LEFT:]
        head = left.strip()
        if head:
            seen = []                                       # a row of the tree: a package or a module
            depth = (len(left) - len(left.lstrip())) // 2
            name = head.split()[0]
            stack = stack[:depth]
            if name.endswith("/"):
                stack.append(name)
                pkg = "".join(stack)
                out.append((i, pkg, ""))
            else:
                pkg = "".join(stack)
                out += [(i, pkg + t, "") for t in tokens(name)]
                right = left[left.index(name) + len(name):] + right
        for t in tokens(right):
            out.append((i, t, "|".join([pkg] + seen)))
            if t.endswith("/"):
                seen.append(t)
    return out


def resolve(name: str, where: str, root: Path = ROOT) -> bool:
    paths = tree(root)
    if "/" in name and name.split("/", 1)[0] in _top_dirs(root):
        return (root / name).exists()
    if name.endswith("/") and not where:
        return True                                  # a run directory's folder, a URL piece: not ours
    if where:
        pkg, *seen = where.split("|")
        for base in [pkg] + [d for d in seen if d.split("/", 1)[0] in _top_dirs(root)]:
            under = [p[len(base):] for p in paths if p.startswith(base)]
            if any(p == name or p.endswith("/" + name) for p in under):
                return True
        if "/" not in name.rstrip("/") and name.endswith(".py"):
            return False                             # a bare module: in its package, nowhere else
    return any(p == name or p.endswith("/" + name) for p in paths)


def missing(doc: str, root: Path = ROOT) -> list[str]:
    return [f"docs/architecture.md:{i}: {name}" + (f" (under {where.split('|')[0]})" if where else "")
            for i, name, where in names(doc) if not resolve(name, where, root)]


def test_every_module_path_the_architecture_doc_names_exists():
    assert missing(DOC.read_text()) == []


def test_the_checker_resolves_names_in_their_package(tmp_path):
    for f in ("loadgen/run/meta.py", "loadgen/client/wire/pool.py", "analysis/metrics/slo.py",
              "loadgen/live/metrics.py"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("")
    doc = "\n".join([
        "# t", "see `loadgen/run/meta.py` and run/meta.py, `loadgen/run/` and run-1/, http://x/v1/",
        "## Layout", "```text",
        "loadgen/".ljust(LEFT) + "the load side",
        "  client/".ljust(LEFT) + "wire/ (pool.py, gone.py), http_client.py",
        "  run/".ljust(LEFT) + "meta.py, runner.py,",
        " " * LEFT + "live/metrics.py, report/report.py",
        "analysis/".ljust(LEFT) + "figures",
        "  metrics/".ljust(LEFT) + "metrics.py (definitions), slo.py",
        "```", "## Other", "scenarios/*.yaml and pool.py, client.py",
    ])
    tree.cache_clear()
    try:
        assert missing(doc, tmp_path) == [
            "docs/architecture.md:6: gone.py (under loadgen/client/)",
            "docs/architecture.md:6: http_client.py (under loadgen/client/)",
            "docs/architecture.md:7: runner.py (under loadgen/run/)",
            "docs/architecture.md:8: report/report.py (under loadgen/run/)",
            "docs/architecture.md:10: metrics.py (under analysis/metrics/)",
            "docs/architecture.md:13: client.py",
        ]
    finally:
        tree.cache_clear()
