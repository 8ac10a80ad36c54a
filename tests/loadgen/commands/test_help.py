"""Every command's --help (loadgen's subcommands, `loadgen serve jax|calib`, `python -m
analysis.contract.export`): exits 0, gives every option a help text, shows a user's description
(not a module's data-flow diagram), names only doc files that exist; and the docs list every
option of serve jax (docs/guide.md), serve calib (docs/calib.md), kernel and calibrate
(docs/kernel.md)."""
from __future__ import annotations

import argparse
import contextlib
import io
import re
from pathlib import Path

import pytest

from analysis.contract import export
from loadgen.cli import build_parser, main as cli_main
from servers.calib.serve import build_parser as calib_parser
from servers.jax.serve import build_parser as jax_parser

ROOT = Path(__file__).resolve().parents[3]
DOC = re.compile(r"docs/[A-Za-z0-9_./-]+\.md")


def parsers() -> dict[str, argparse.ArgumentParser]:
    """{"loadgen run": parser, ...}: every parser reachable from the CLI, and the servers'."""
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        out[name] = p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, sp in a.choices.items():
                    walk(sp, f"{name} {sub}")

    walk(build_parser(), "loadgen")
    out["loadgen serve jax"] = jax_parser("loadgen serve jax")
    out["loadgen serve calib"] = calib_parser("loadgen serve calib")
    out["python -m analysis.contract.export"] = export.build_parser()
    return out


def options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if not isinstance(a, (argparse._HelpAction,
                                                        argparse._VersionAction,
                                                        argparse._SubParsersAction))]


@pytest.mark.parametrize("name", sorted(parsers()))
def test_every_option_has_a_help_text(name):
    missing = [a.option_strings or [a.dest] for a in options(parsers()[name]) if not a.help]
    assert missing == [], f"{name}: options without help text: {missing}"


def help_text(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue() + err.getvalue()




@pytest.mark.parametrize("cmd", [name.split()[1:] for name in sorted(parsers())
                                 if name.startswith("loadgen")], ids=" ".join)
def test_help_exits_0_without_diagrams_and_names_only_docs_that_exist(cmd):
    code, text = help_text(cmd + ["--help"])
    assert code == 0, text
    assert "usage:" in text
    assert "─►" not in text and "└►" not in text, f"{cmd}: a data-flow diagram in --help"
    for doc in DOC.findall(text.replace("\n", " ")):
        assert (ROOT / doc).is_file(), f"loadgen {' '.join(cmd)} --help names {doc}: no such file"


def test_export_help_is_help_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        export.main(["--help"])
    assert e.value.code == 0
    assert "usage:" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []            # before: a directory named --help
    assert export.main([str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "record.json").is_file()


def test_serve_without_server_flags_needs_only_the_server(capsys):
    code, text = help_text(["serve"])
    assert code == 2 and "server_args" not in text and "required: server" in text


def documented(doc: str, p: argparse.ArgumentParser) -> list[list[str]]:
    text = (ROOT / doc).read_text()
    return [a.option_strings for a in options(p) if a.option_strings and not any(
        re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", text) for s in a.option_strings)]


@pytest.mark.parametrize("doc, name", [("docs/guide.md", "loadgen serve jax"),
                                       ("docs/calib.md", "loadgen serve calib"),
                                       ("docs/kernel.md", "loadgen kernel"),
                                       ("docs/kernel.md", "loadgen calibrate")])
def test_the_docs_list_every_option(doc, name):
    assert documented(doc, parsers()[name]) == [], f"{doc} does not list these {name} options"
