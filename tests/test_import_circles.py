"""No import circle among the source modules (loadgen/ analysis/ servers/ bench/), checked statically.

Every ``.py`` file is parsed with ``ast``; every import statement at any depth (module top level,
inside functions, inside ``if TYPE_CHECKING:``) is an edge from that module to the module it names:
``import a.b`` → ``a.b``; ``from a.b import c`` → ``a.b.c`` when that is a module, else ``a.b``;
relative imports are resolved against the importing module's package. A package's ``__init__``
is the module ``a.b``; the parent packages an import runs on the way (``a`` for ``a.b``) are not
edges (a package whose ``__init__`` imports its own modules is no circle). Edges leaving the four
roots are ignored. Any strongly connected set of two
or more modules (or a module importing itself) is a circle and fails the test with its members.
"""
from __future__ import annotations

import ast
from pathlib import Path

from tests.support.source import parse

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ("loadgen", "analysis", "servers", "bench")


def module_files(root: Path, roots=ROOTS) -> dict[str, Path]:
    """Module name → file, for every .py file under the roots."""
    out = {}
    for top in roots:
        for f in sorted((root / top).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _resolve(importer: str, is_pkg: bool, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    base = importer.split(".") if is_pkg else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else [])) or None


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The in-tree modules one module imports, at any depth."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(name, is_pkg, node)
            if mod is None:
                continue
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known]
            out.update(subs)
            if len(subs) < len(node.names):       # some names are attributes of mod itself
                out.add(mod)
    return {m for m in out if m in known}


def import_graph(root: Path = ROOT, roots=ROOTS) -> dict[str, set[str]]:
    files = module_files(root, roots)
    known = set(files)
    return {name: imports_of(name, f, known) for name, f in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules, or a module importing itself (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in graph[v]:
                        found.append(sorted(comp))
    return sorted(found)


def test_no_import_circle_in_the_source_tree():
    found = circles(import_graph())
    assert found == [], "import circles (break them by moving the shared piece):\n" + "\n".join(
        " ⇄ ".join(c) for c in found)


def test_the_checker_sees_function_level_relative_and_long_circles(tmp_path):
    pkg = tmp_path / "loadgen" / "p"
    pkg.mkdir(parents=True)
    (tmp_path / "loadgen" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import os\n\ndef f():\n    from loadgen.p import b\n")   # lazy, from-import of a module
    (pkg / "b.py").write_text("from .c import thing\n")                                  # relative
    (pkg / "c.py").write_text("import loadgen.p.a\nthing = 1\n")                         # closes a → b → c → a
    (pkg / "d.py").write_text("from loadgen.p.c import thing\n")                         # outside the circle
    graph = import_graph(tmp_path, ("loadgen",))
    assert graph["loadgen.p.a"] == {"loadgen.p.b"}
    assert graph["loadgen.p.b"] == {"loadgen.p.c"}
    assert circles(graph) == [["loadgen.p.a", "loadgen.p.b", "loadgen.p.c"]]
    (pkg / "c.py").write_text("thing = 1\n")
    assert circles(import_graph(tmp_path, ("loadgen",))) == []


def test_the_checker_sees_a_two_module_circle_through_a_package_init(tmp_path):
    pkg = tmp_path / "servers" / "q"
    pkg.mkdir(parents=True)
    (tmp_path / "servers" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from servers.q.x import X\n")
    (pkg / "x.py").write_text("def f():\n    from servers.q import helper\n    return helper\nX = 1\n")
    assert circles(import_graph(tmp_path, ("servers",))) == [["servers.q", "servers.q.x"]]
