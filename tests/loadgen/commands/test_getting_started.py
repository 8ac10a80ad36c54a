"""docs/getting-started.md (issue #38): linked from the top of README.md, and its commands are
ones loadgen takes as written — the validate line prints the plan of the very run the next line
starts (the same scenario and overrides), against the calibration server the serve line starts.
(The whole page, server and run included, is run by the docs-snippet tests.)"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

from loadgen.cli import main as cli_main
from servers.calib.serve import build_parser as calib_parser, check_args

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "getting-started.md"


def commands() -> list[list[str]]:
    block = re.search(r"```bash\n(.*?)```", PAGE.read_text(), re.S).group(1)
    return [shlex.split(line.rstrip("&").strip()) for line in block.strip().splitlines()]


def test_readme_links_it_before_anything_else():
    head = (ROOT / "README.md").read_text().split("\n## ", 1)[0]
    assert "(docs/getting-started.md)" in head


def test_its_commands_are_what_loadgen_takes(monkeypatch, tmp_path):
    cmds = commands()
    serve = next(c for c in cmds if c[:3] == ["loadgen", "serve", "calib"])
    flags = calib_parser().parse_args(serve[3:])
    assert check_args(flags) is None
    validate = next(c for c in cmds if c[:2] == ["loadgen", "validate"])
    run = next(c for c in cmds if c[:2] == ["loadgen", "run"])
    assert validate[2:] == run[2:]                      # the plan of the run that follows
    assert f"target.url=http://127.0.0.1:{flags.port}" in run
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(validate[1:]) == 0
    assert f"http://127.0.0.1:{flags.port}" in out.getvalue()
    assert "40 measured requests" in out.getvalue()
