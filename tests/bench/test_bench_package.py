"""bench/ is a package run as ``python -m bench.NAME``: no sys.path edits, no imports of tests/, every module
importable from the repository root with nothing added to the path, every documented command in -m form."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.source import parse

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
LOCUSTFILES = {"locust_streaming"}          # `locust -f` files: importing locust patches the process


def _sources() -> list[Path]:
    return sorted(BENCH.rglob("*.py"))


def _modules() -> list[str]:
    out = []
    for f in _sources():
        parts = f.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] not in LOCUSTFILES:
            out.append(".".join(parts))
    return out


def _path_edits(source: str) -> list[int]:
    """Lines that touch sys.path: ``sys.path.insert/append/...``, ``sys.path = ...``, ``sys.path[...]``,
    also inside a string that is run as code (``python -c``)."""
    lines = []
    for node in ast.walk(parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
                and node.value.id == "sys"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(
                r"sys\.path\.(insert|append|extend)\(|sys\.path\s*(\[|=[^=])", node.value):
            lines.append(node.lineno)
    return lines


def test_the_checker_sees_a_path_edit():
    assert _path_edits("import sys\nsys.path.insert(0, 'x')\n") == [2]
    assert _path_edits("ROOF = '''\nimport sys\nsys.path.insert(0, sys.argv[1])\n'''\n") == [1]
    assert _path_edits('"""Never edits sys.path: a package."""\n') == []


def test_bench_is_a_package_whose_inits_say_what_they_hold():
    for pkg in (BENCH, BENCH / "wire", BENCH / "compat"):
        doc = ast.get_docstring(parse((pkg / "__init__.py").read_text()))
        assert doc and "python -m bench" in doc, pkg
    assert "Imports:" in ast.get_docstring(parse((BENCH / "__init__.py").read_text()))


def test_no_bench_module_edits_sys_path_or_imports_tests():
    bad = []
    for f in _sources():
        src = f.read_text()
        bad += [f"{f.relative_to(ROOT)}:{n} edits sys.path" for n in _path_edits(src)]
        for node in ast.walk(parse(src)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            bad += [f"{f.relative_to(ROOT)} imports {m}" for m in names if m == "tests" or m.startswith("tests.")]
    assert bad == []


def test_the_product_never_imports_bench():
    bad = []
    for pkg in ("loadgen", "analysis", "servers"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(parse(f.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                         else [])
                bad += [f"{f.relative_to(ROOT)} imports {m}" for m in names if m == "bench" or m.startswith("bench.")]
    assert bad == []


def test_documented_bench_commands_use_the_module_form():
    """`python bench/X.py` nowhere in the docs, the README or the benches' own usage lines (bench/results/
    keeps what was typed at the time)."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *_sources(),
             *sorted(f for f in BENCH.rglob("*.md") if "results" not in f.parts), BENCH / "gpu_check.sh"]
    bad = [f"{f.relative_to(ROOT)}:{i}" for f in files
           for i, line in enumerate(f.read_text().splitlines(), 1)
           if re.search(r"(python3?|\$PY\"?) bench/[\w/]+\.py", line)]
    assert bad == []


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_every_bench_module_imports_from_the_repository_root_alone():
    """One child, cwd = the repository root, no PYTHONPATH: what `python -m bench.NAME` sees."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint('ok')"
    p = subprocess.run([sys.executable, "-c", code, *_modules()], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "ok"
