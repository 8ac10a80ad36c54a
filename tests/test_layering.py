"""The one-way import rule, checked statically on every source file (lazy imports inside functions too).

    loadgen ─► analysis, servers          analysis ─╳─► loadgen        servers ─╳─► loadgen
    inside analysis: report reads the others; metrics, energy, roofline, server, kernel never read report
    inside loadgen: client and scenario never read run/, engine/, multirun/, console/ or targets/
    (nothing slow near the stamps); engine/core/ runs no driver (no asyncio, no gevent) and
    engine/aio/ no gevent; run/ and engine/ never read multirun/; console/ only prints
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
    ("loadgen/client", ("loadgen.run", "loadgen.targets", "analysis", "loadgen.engine.locust",
                        "loadgen.engine", "loadgen.multirun", "loadgen.console")),
    # the Locust users' gevent driver: Locust's gevent world runs no asyncio code
    # (client/wire/ is the asyncio driver only: the gevent driver shares client/settle.py and
    # client/kernel_stamps.py with it, never a module of it)
    ("loadgen/client/gevent_wire", ("asyncio", "aiohttp", "uvloop", "loadgen.client.wire",
                                    "loadgen.client.http_client")),
    ("loadgen/scenario", ("loadgen.run", "loadgen.targets", "loadgen.client", "loadgen.engine",
                          "loadgen.multirun", "loadgen.console")),
    # the sender's rules, sans I/O: no driver, no transport (every runtime imports them)
    ("loadgen/engine/core", ("asyncio", "gevent", "locust", "aiohttp", "uvloop",
                             "loadgen.engine.aio", "loadgen.engine.procs", "loadgen.engine.locust",
                             "loadgen.client.wire", "loadgen.client.gevent_wire",
                             "loadgen.client.http_client", "loadgen.multirun", "loadgen.console")),
    # the asyncio driver: never gevent, never the run around it
    ("loadgen/engine/aio", ("gevent", "locust", "loadgen.engine.locust", "loadgen.client.gevent_wire",
                            "loadgen.engine.procs", "loadgen.run", "loadgen.multirun",
                            "loadgen.console")),
    ("loadgen/engine/procs", ("gevent", "locust", "loadgen.engine.locust",
                              "loadgen.client.gevent_wire", "loadgen.multirun")),
    ("loadgen/engine", ("loadgen.multirun",)),
    ("loadgen/run", ("loadgen.multirun",)),
    ("loadgen/console", ("loadgen.run", "loadgen.engine", "loadgen.multirun", "loadgen.client",
                         "loadgen.targets", "loadgen.engine.locust")),
    # the gevent driver (its CLI side may use asyncio: it only spawns and waits, no gevent there)
    ("loadgen/engine/locust", ("aiohttp", "uvloop", "loadgen.client.wire", "loadgen.client.http_client",
                               "loadgen.engine.aio", "loadgen.engine.procs", "loadgen.multirun")),
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
