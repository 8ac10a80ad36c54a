"""Every ```yaml and shell (```bash/sh/console/shell) block of README.md and docs/*.md is loaded
or checked (tests/docs/check.py says how); a block marked ``<!-- docs-test: skip (REASON) -->``
is reported as skipped with its reason (pytest -rs). Every fence names its language, so no
command or scenario hides in an unlabelled block."""
from __future__ import annotations

import pytest

from analysis.contract import yaml12
from tests.docs.blocks import ROOT, SHELL_LANGS, YAML_LANGS, all_blocks, blocks, commands, \
    markdown_files
from tests.docs.check import check_command, check_scenario_text, documents

YAML_BLOCKS = all_blocks(YAML_LANGS)
SHELL_BLOCKS = all_blocks(SHELL_LANGS)


@pytest.fixture
def at_root(monkeypatch, tmp_path):
    """Documented paths are relative to the repository root; no API key in the environment."""
    monkeypatch.chdir(ROOT)
    for var in ("OPENAI_API_KEY",):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_the_docs_have_blocks_to_check():
    assert len(YAML_BLOCKS) >= 10 and len(SHELL_BLOCKS) >= 10


def test_every_fence_names_its_language():
    bare = [b.id for f in markdown_files() for b in blocks(f) if not b.lang]
    assert bare == [], "label these fences (```yaml, ```bash, ```text, ...)"


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda b: b.id)
def test_yaml_block_loads(block, at_root):
    if block.skip:
        pytest.skip(f"{block.id}: {block.skip}")
    docs = documents(block.text)
    assert docs, f"{block.id}: no YAML document"
    for k, doc in enumerate(docs):
        assert check_scenario_text(doc, at_root) == [], f"{block.id} document {k + 1}"


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.id)
def test_shell_block_runs_as_written(block, at_root):
    if block.skip:
        pytest.skip(f"{block.id}: {block.skip}")
    checked, problems = 0, []
    for argv in commands(block):
        got = check_command(argv, at_root)
        if got is not None:
            checked += 1
            problems += [f"{' '.join(argv)}: {p}" for p in got]
    assert problems == [], block.id
    assert checked, (f"{block.id}: nothing in it can be checked here; mark it "
                     "<!-- docs-test: skip (why) -->")


SHOWN = [b for f in markdown_files() for b in blocks(f) if b.shows]


def test_some_blocks_show_shipped_files():
    assert {b.shows for b in SHOWN} >= {"scenarios/data/prompts.jsonl",
                                        "scenarios/data/conversations.json"}


@pytest.mark.parametrize("block", SHOWN, ids=lambda b: b.id)
def test_a_block_that_shows_a_file_is_that_file(block):
    f = ROOT / block.shows
    assert f.is_file(), f"{block.id}: {block.shows}: no such file"
    assert block.text.strip() == f.read_text(encoding="utf-8").strip(), block.id


def _readme_inline_examples() -> list[str]:
    """README's inline ``key: {...}`` examples that name every value (no ``|`` alternatives, no
    ``...``, no key without a value): each is a fragment, as a block would be."""
    import re
    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("\n", " ")
    out = []
    for m in re.finditer(r"`((?:target|api|workload|load|slo|sweep|cost|output)(?:\.\w+)*: \{[^`]*\})`",
                         text):
        span = m.group(1)
        if "|" in span or "..." in span or "…" in span:
            continue
        key, _, value = span.partition(": ")
        if _has_none(yaml12.load(value)):
            continue
        keys = key.split(".")          # a.b: {..}  ─►  a: {b: {..}}
        out.append(" ".join(span.split()) if len(keys) == 1 else
                   "".join(f"{k}: {{" for k in keys[:-1]) + f"{keys[-1]}: {value}" + "}" * (len(keys) - 1))
    return out


def _has_none(v) -> bool:
    if isinstance(v, dict):
        return any(_has_none(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_none(x) for x in v)
    return v is None


README_INLINE = _readme_inline_examples()


def test_readme_has_inline_examples():
    assert any(s.startswith("sweep:") for s in README_INLINE)


@pytest.mark.parametrize("span", README_INLINE, ids=str)
def test_readme_inline_example_loads(span, at_root):
    assert check_scenario_text(span + "\n", at_root) == [], span
