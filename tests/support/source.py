"""Parsing this tree's source in tests (import rules, docstrings): ``parse(text)``.

CPython 3.11's ``ast.parse`` can fail with "SystemError: AST constructor recursion depth
mismatch" when a garbage collection runs finalizers (sockets, generators an earlier test left)
while it builds the tree: the result would depend on another test's leftovers. The cyclic GC is
kept off for the parse itself."""
from __future__ import annotations

import ast
import gc


def parse(source: str) -> ast.Module:
    was = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if was:
            gc.enable()
