"""The one-way import rule, checked statically on every source file (lazy imports inside functions too).

    loadgen ─► analysis, servers          analysis ─╳─► loadgen        servers ─╳─► loadgen
    inside analysis: report reads the others; metrics, energy, roofline, server, kernel never read report
    inside loadgen: client and scenario never read run/ or targets/ (nothing slow near the stamps)
    but: loadgen/client may import exactly analysis.server.rules (the Retry-After and usage-count
    rules it shares with the sanity gate), a module that imports the standard library only
"""
import ast
import sys
from pathlib import Path

import pytest
from tests.support.source import parse

ROOT = Path(__file__).resolve().parents[1]

RULES = [  # (package dir, forbidden module prefixes)
    ("analysis", ("loadgen",)),
    ("servers", ("loadgen", "analysis")),
    ("analysis/metrics", ("analysis.report",)),
    ("analysis/energy", ("analysis.report", "analysis.metrics")),
    ("analysis/roofline", ("analysis.report", "analysis.metrics")),
    ("analysis/server", ("analysis.report",)),
    ("analysis/kernel", ("analysis.report",)),
    # the contract (record type, readers, timing definitions) is what metrics/ AND roofline/
    # import: it reads no figure module but metrics' summary (open_run, lazily)
    ("analysis/contract", ("analysis.report", "analysis.roofline", "analysis.energy",
                           "analysis.server", "analysis.kernel", "analysis.metrics.slo",
                           "analysis.metrics.figures")),
    ("loadgen/client", ("loadgen.run", "loadgen.targets", "analysis", "loadgen.locust_engine")),
    # the Locust users' gevent driver: Locust's gevent world runs no asyncio code
    ("loadgen/client/gevent_wire", ("asyncio", "aiohttp", "uvloop", "loadgen.client.wire.pool",
                                    "loadgen.client.wire.conn", "loadgen.client.http_client")),
    ("loadgen/scenario", ("loadgen.run", "loadgen.targets", "loadgen.client")),
]
ALLOWED = {  # (package dir) ─► modules it may import although a prefix above forbids them
    "loadgen/client": ("analysis.server.rules",),
}
SHARED_RULES = "analysis/server/rules.py"    # stdlib only: the client imports it


def imported_modules(source: str) -> set[str]:
    """Every module an import statement names, at any depth (``from a import b`` gives a and a.b)."""
    out: set[str] = set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _under(mod: str, prefixes: tuple[str, ...]) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def violations(pkg_dir: Path, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    bad = []
    for f in sorted(pkg_dir.rglob("*.py")):
        for mod in sorted(imported_modules(f.read_text())):
            if _under(mod, forbidden) and not _under(mod, allowed):
                bad.append(f"{f.relative_to(pkg_dir.parent)} imports {mod}")
    return bad


@pytest.mark.parametrize("pkg,forbidden", RULES, ids=[r[0] for r in RULES])
def test_imports_run_one_way(pkg, forbidden):
    assert (ROOT / pkg).is_dir()
    assert violations(ROOT / pkg, forbidden, ALLOWED.get(pkg, ())) == []


def test_the_shared_rules_import_the_standard_library_only():
    """analysis/server/rules.py: no pydantic, no numpy, nothing of analysis or loadgen (the
    client imports it, and with it analysis/__init__ and analysis/server/__init__: docstrings)."""
    mods = imported_modules((ROOT / SHARED_RULES).read_text())
    assert mods and not [m for m in mods if m.split(".")[0] not in sys.stdlib_module_names]
    for init in ("analysis/__init__.py", "analysis/server/__init__.py"):
        assert imported_modules((ROOT / init).read_text()) == set(), init


def test_the_allowance_is_exactly_one_module(tmp_path):
    (tmp_path / "m.py").write_text("from analysis.server.rules import token_count\n"
                                   "import analysis.server.sanity\n"
                                   "from analysis.server import rules\n")
    assert violations(tmp_path, ("analysis",), ("analysis.server.rules",)) == [
        f"{tmp_path.name}/m.py imports analysis.server", f"{tmp_path.name}/m.py imports analysis.server.sanity"]


def test_the_checker_sees_lazy_and_from_imports(tmp_path):
    (tmp_path / "m.py").write_text("import os\n\ndef f():\n    from loadgen.run import runner\n"
                                   "    import analysis.report.render\n")
    mods = imported_modules((tmp_path / "m.py").read_text())
    assert {"loadgen.run", "loadgen.run.runner", "analysis.report.render"} <= mods
    assert violations(tmp_path, ("loadgen",)) == [f"{tmp_path.name}/m.py imports loadgen.run",
                                                  f"{tmp_path.name}/m.py imports loadgen.run.runner"]
    assert violations(tmp_path, ("os.path",)) == []


def test_pytest_process_never_gevent_patched():
    """No test module may import locust into the pytest process (runs last, after every test):
    locust's import-time monkey-patching would turn every later test's sockets, threads and subprocess forks
    into greenlets (Locust runs in its own processes; the suite checks it there)."""
    import sys
    assert "locust" not in sys.modules                  # its import calls monkey.patch_all()
    if "gevent" in sys.modules:                         # imported (clock helpers), never patched
        from gevent import monkey
        assert not [m for m in ("socket", "thread", "os", "subprocess", "select")
                    if monkey.is_module_patched(m)]
