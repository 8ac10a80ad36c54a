"""`loadgen serve jax ...` (loadgen/commands/serve.py) hands its flags to servers.jax.serve.main."""
from __future__ import annotations

import argparse

import pytest

from loadgen.commands import serve

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loadgen")
    serve.register(p.add_subparsers(dest="command"))
    return p


def test_bad_server_flag_is_one_line_exit_2(capsys):
    args = parser().parse_args(["serve", "jax", "--preset", "tiny", "--slots", "0"])
    assert args.server == "jax" and args.func(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["loadgen serve jax: error: --slots: must be >= 1, got 0"]


def test_help_lists_the_server_flags(capsys):
    args = parser().parse_args(["serve", "jax", "--help"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "usage: loadgen serve jax" in out and "--max-model-len" in out


def test_unknown_server_is_rejected():
    with pytest.raises(SystemExit) as e:
        parser().parse_args(["serve", "tgi"])
    assert e.value.code == 2
