"""loadgen/console/progress.py: a sweep point's bars carry the point ("concurrency=4 3/8")."""
from __future__ import annotations

import io

from rich.console import Console

from loadgen.console.progress import RunProgress


def test_each_phase_bar_is_labelled_with_the_point():
    con = Console(file=io.StringIO(), force_terminal=True, width=120)
    p = RunProgress(None, console=con, point="concurrency=4 3/8")
    p.start("warm-up", 2)
    p.stop()
    p.start("measured", 8)
    p.stop()
    out = con.file.getvalue()
    assert "concurrency=4 3/8  warm-up" in out and "concurrency=4 3/8  measured" in out


def test_a_plain_run_keeps_its_labels():
    con = Console(file=io.StringIO(), force_terminal=True, width=120)
    p = RunProgress(None, console=con)
    p.start("measured", 1)
    p.stop()
    assert "measured" in con.file.getvalue() and "=" not in con.file.getvalue().split("measured")[0]
