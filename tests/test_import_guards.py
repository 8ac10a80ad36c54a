"""No ``except ImportError`` around the project's own modules: a broken module of ours must fail
loudly, not turn into "unavailable". Guards stay only around optional third-party packages."""
import ast
from pathlib import Path
from tests.support.source import parse

ROOT = Path(__file__).resolve().parents[1]
OURS = ("loadgen", "analysis", "servers")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
               for n in names)


def guarded_own_imports(source: str) -> list[str]:
    out = []
    for node in ast.walk(parse(source)):
        if not isinstance(node, ast.Try) or not any(_catches_import_error(h) for h in node.handlers):
            continue
        for stmt in node.body:
            for sub in ast.walk(stmt):
                mods = ([a.name for a in sub.names] if isinstance(sub, ast.Import) else
                        [sub.module or ""] if isinstance(sub, ast.ImportFrom) and sub.level == 0
                        else ["." + (sub.module or "")] if isinstance(sub, ast.ImportFrom) else [])
                out += [f"line {sub.lineno}: {m}" for m in mods
                        if m.startswith(".") or m.split(".")[0] in OURS]
    return out


def test_no_import_error_guard_around_our_modules():
    bad = {str(f.relative_to(ROOT)): g for pkg in OURS for f in sorted((ROOT / pkg).rglob("*.py"))
           if (g := guarded_own_imports(f.read_text()))}
    assert bad == {}


def test_the_checker_sees_a_guarded_own_import():
    src = ("try:\n    from analysis.energy import energy\nexcept ImportError:\n    pass\n"
           "try:\n    import psutil\nexcept (ImportError, OSError):\n    pass\n")
    assert guarded_own_imports(src) == ["line 2: analysis.energy"]
