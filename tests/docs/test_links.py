"""Every relative markdown link of README.md, docs/*.md and bench/results/*.md resolves: the file
(or folder) exists, and a ``#anchor`` names a heading of the target by GitHub's slug rule (or an
explicit ``<a name=...>`` / ``id=...``).

    markdown ─► links(): (line, target) per [text](target), ![alt](target) and [ref]: target,
                outside fenced blocks and inline code; http(s)/mailto targets are left out
    target file ─► anchors(): the slug of every heading (GitHub: lowercase, markup dropped, every
                character but letters, digits, '_', '-' and ' ' removed, ' ' → '-', a repeated
                slug gets -1, -2, ...) plus explicit anchors
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.docs.blocks import ROOT

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPLICIT = re.compile(r"<a\s[^>]*?(?:name|id)\s*=\s*\"([^\"]+)\"", re.I)
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def link_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "bench" / "results").glob("*.md"))]


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                fence = None
            continue
        yield n, line


def links(text: str) -> list[tuple[int, str]]:
    out = []
    for n, line in _prose_lines(text):
        m = _REFDEF.match(line)
        if m:
            out.append((n, m.group(1)))
            continue
        bare = _CODE_SPAN.sub("", line)
        out += [(n, t) for t in _INLINE.findall(bare)]
    return [(n, t) for n, t in out if not _EXTERNAL.match(t)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's markdown text."""
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)       # links and images: their text
    s = re.sub(r"<[^>]+>", "", s)                                 # inline HTML
    s = re.sub(r"(\*\*|__|\*|`)", "", s)                          # emphasis and code marks
    s = s.strip().lower()
    s = "".join(c for c in s if c.isalnum() or c in "_- " or _is_mark(c))
    return s.replace(" ", "-")


def _is_mark(c: str) -> bool:
    import unicodedata
    return unicodedata.category(c).startswith("M")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set(_EXPLICIT.findall(text))
    for _, line in _prose_lines(text):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.add(base if k == 0 else f"{base}-{k}")
    return out


def broken(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT)
    problems = []
    for n, target in links(text):
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / unquote(file_part)).resolve()
        if not dest.exists():
            problems.append(f"{rel}:{n}: {target}: no such file")
            continue
        if ROOT.resolve() not in dest.resolve().parents and dest.resolve() != ROOT.resolve():
            problems.append(f"{rel}:{n}: {target}: outside the repository")
            continue
        if anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(
                dest.read_text(encoding="utf-8")):
            problems.append(f"{rel}:{n}: {target}: no heading #{anchor} in {dest.name}")
    return problems


def test_there_are_links_to_check():
    assert sum(len(links(p.read_text(encoding="utf-8"))) for p in link_files()) >= 20


@pytest.mark.parametrize("path", link_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert broken(path) == []


@pytest.mark.parametrize("heading, expected", [
    ("Two commands", "two-commands"),
    ("Capacity planning: the throughput–interactivity frontier, cost, accuracy",
     "capacity-planning-the-throughputinteractivity-frontier-cost-accuracy"),
    ("Definitions (docs/metrics.md has the formulas and how other tools differ)",
     "definitions-docsmetricsmd-has-the-formulas-and-how-other-tools-differ"),
    ("Threads (servers/jax/kernels/matmul.cc: `run_parts`)",
     "threads-serversjaxkernelsmatmulcc-run_parts"),
    ("The FFI matmul kernel of the JAX engine (`--matmul xla|ffi|auto`)",
     "the-ffi-matmul-kernel-of-the-jax-engine---matmul-xlaffiauto"),
    ("See [the guide](docs/guide.md) **now**", "see-the-guide-now"),
])
def test_slug_follows_githubs_rule(heading, expected):
    assert slug(heading) == expected


def test_a_repeated_heading_gets_a_number():
    assert {"notes", "notes-1", "notes-2"} <= anchors("# Notes\n## Notes\n### Notes\n")


def test_a_broken_link_and_a_broken_anchor_are_found(tmp_path, monkeypatch):
    import tests.docs.test_links as me
    monkeypatch.setattr(me, "ROOT", tmp_path)
    (tmp_path / "b.md").write_text("# Real heading\n", encoding="utf-8")
    a = tmp_path / "a.md"
    a.write_text("[ok](b.md#real-heading) [gone](c.md) [bad](b.md#nope) [self](#top)\n"
                 "`[code](x.md)`\n```text\n[fenced](y.md)\n```\n# Top\n", encoding="utf-8")
    got = broken(a)
    assert len(got) == 2 and "c.md: no such file" in got[0] and "#nope" in got[1]


def test_every_result_file_is_in_the_index():
    """bench/results/README.md names every file of bench/results/ (by its name, or its stem with
    the extensions in braces: ``hostile-20261205.{txt,json}``)."""
    folder = ROOT / "bench" / "results"
    index = (folder / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted(folder.iterdir())
               if p.is_file() and p.name != "README.md"
               and p.name not in index and p.name.split(".")[0] + "." not in index]
    assert missing == [], "add a line for each to bench/results/README.md"
