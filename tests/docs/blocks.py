"""The fenced code blocks of README.md and docs/*.md, and the shell commands inside them: what
tests/docs runs or loads.

    markdown ─► blocks(): Block(file, line, lang, text, skip) per ``` fence
        skip: the reason in ``<!-- docs-test: skip (REASON) -->`` on the line right before the fence
        shows: PATH in ``<!-- docs-test: file PATH -->`` there: the block is that file's content
    shell block ─► commands(): argv per command (lines joined at a trailing backslash, comments
        dropped, split at && || ; | &; leading VAR=value and `. venv/bin/activate` dropped;
        ```console blocks: only the lines after "$ ")
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
YAML_LANGS = {"yaml", "yml"}
SHELL_LANGS = {"bash", "sh", "console", "shell"}
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((.+)\)\s*-->")
_FILE = re.compile(r"<!--\s*docs-test:\s*file\s+(\S+)\s*-->")
_SEPARATORS = {"&&", "||", ";", "|", "&", ";;", "(", ")"}


@dataclass(frozen=True)
class Block:
    file: str           # relative to the repository root
    line: int           # the opening fence's line (1-based)
    lang: str
    text: str
    skip: Optional[str]
    shows: Optional[str] = None     # a repository file whose content the block is

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group(2), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        skip, shows = _SKIP.search(before), _FILE.search(before)
        out.append(Block(str(path.relative_to(ROOT)), start + 1, m.group(3).lower(),
                         "\n".join(lines[start + 1:j]), skip.group(1) if skip else None,
                         shows.group(1) if shows else None))
        i = j + 1
    return out


def all_blocks(langs: set[str]) -> list[Block]:
    return [b for f in markdown_files() for b in blocks(f) if b.lang in langs]


def commands(block: Block) -> list[list[str]]:
    raw = block.text.splitlines()
    if block.lang == "console":
        raw = [ln.strip()[2:] for ln in raw if ln.strip().startswith("$ ")]
    joined, cur = [], ""
    for ln in raw:
        if ln.rstrip().endswith("\\"):
            cur += ln.rstrip()[:-1] + " "
            continue
        joined.append(cur + ln)
        cur = ""
    out: list[list[str]] = []
    for ln in joined:
        lex = shlex.shlex(ln, posix=True, punctuation_chars=True)
        lex.whitespace_split, lex.commenters = True, "#"
        argv: list[str] = []
        for tok in [*lex, ";"]:
            if tok not in _SEPARATORS:
                argv.append(tok)
                continue
            while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
                argv.pop(0)                     # VAR=value cmd ...
            if argv and argv[0] not in (".", "source"):
                out.append(argv)
            argv = []
    return out
