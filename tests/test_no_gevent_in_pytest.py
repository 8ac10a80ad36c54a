"""No test may monkey-patch the pytest process (importing locust does: gevent's patch_all), or every
later test's threads, sockets and subprocesses run on gevent's hub and may hang. Locust runs in
subprocesses; tests look for it with importlib.util.find_spec, never import it here."""
import ast
from pathlib import Path
from tests.support.source import parse

ROOT = Path(__file__).resolve().parent


def test_no_test_imports_locust_or_patches_gevent_in_the_pytest_process():
    bad = []
    for f in sorted(ROOT.rglob("*.py")):
        tree = parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip" \
                    and node.args and isinstance(node.args[0], ast.Constant) \
                    and str(node.args[0].value).split(".")[0] in ("locust", "gevent"):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno} importorskip({node.args[0].value!r})")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                    else [node.module or ""]
                if any(n.split(".")[0] == "locust" for n in names):
                    bad.append(f"{f.relative_to(ROOT)}:{node.lineno} imports locust")
    assert bad == []
