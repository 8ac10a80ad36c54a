"""Text from users and servers made fit for a one-line message.

    any text (a model name, a path, a server's error body, an exception) ─► one_line(text, limit)
        control characters (newline, carriage return, tab, ESC, NUL, U+2028 ...) written as their
        Python escapes (\\n, \\r, \\t, \\x1b, \\x00, \\u2028), so the message stays one line and no
        terminal escape sequence reaches the screen; longer than ``limit`` characters: cut, and
        "… (N more characters)" says so
Used where one-line errors are printed (loadgen/cli.py ``loadgen: error: ...``). Pure.
"""
from __future__ import annotations

import unicodedata
from typing import Any

LIMIT = 2000           # characters of one error line (a long path list still fits)


def _escape(ch: str) -> str:
    if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
        return repr(ch)[1:-1] if ch not in "'\"" else ch
    return ch


def one_line(text: Any, limit: int = LIMIT) -> str:
    """``text`` as one line: control characters repr-escaped, at most ``limit`` characters
    (then "… (N more characters)")."""
    s = "".join(map(_escape, str(text)))
    if len(s) > limit:
        s = f"{s[:limit]}… ({len(s) - limit} more characters)"
    return s
