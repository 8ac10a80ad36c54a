"""Issue #41 item 23: no verdict reason renders a None; user/server text cannot break a one-line
error (analysis.text.one_line, used by loadgen/cli.py); tiny and huge numbers keep their
significant digits, never a misleading 0 (analysis.report.render.num / fmt, the cost rows)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from analysis.metrics.cost import cost_block
from analysis.metrics.slo import verdict
from analysis.report.cost_accuracy import cost_blocks, cost_line
from analysis.report.render import fmt, num, render_md
from analysis.text import one_line
from tests.analysis.synth import rec, server_meta

ROOT = Path(__file__).resolve().parents[3]


def test_a_fully_aborted_run_names_no_none_in_its_verdict():
    recs = [rec(i, sched=10 * i, sent=10 * i, chunks=[[10 * i + 5, 1]], end=10 * i + 8,
                status="aborted", error_kind="aborted") for i in range(5)]
    v = verdict(recs, server_meta(min_duration_s=0.0))
    assert not v["valid"]
    text = "; ".join(v["reasons"])
    assert "n/a" not in text and "None" not in text, text
    assert "no measured window (no measured request was sent and ended), so no duration to hold " \
           "against min_duration_s 0" in text


def test_one_line_escapes_control_characters_and_bounds_the_length():
    assert one_line("model a\nb") == "model a\\nb"
    assert one_line("x\r\ty\x00\x1b[31mz\u2028") == "x\\r\\ty\\x00\\x1b[31mz\\u2028"
    assert one_line("é ünïcode 'q' \"d\"") == "é ünïcode 'q' \"d\""     # printable: as it is
    assert one_line("a" * 50, limit=10) == "a" * 10 + "… (40 more characters)"
    assert "\n" not in one_line(ValueError("line1\nline2"))


def test_the_cli_error_line_stays_one_line(tmp_path):
    bad = tmp_path / "run\nINJECTED: fake line\x1b[2J"
    out = subprocess.run([sys.executable, "-m", "loadgen.cli", "report", str(bad)], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1, out.stderr                 # exactly one line
    assert out.stderr.startswith("loadgen: error: RUN_DIR: ")
    assert "run\\nINJECTED: fake line\\x1b[2J" in out.stderr and "\x1b" not in out.stderr


def test_num_keeps_significant_digits():
    assert num(1e-320) == "1.000e-320"
    assert num(1.2345e-5) == "1.234e-05"
    assert num(0.01234) == "0.01234"
    assert num(12.345) == "12.35"
    assert num(9.99996) == "10.00"
    assert num(12345.6) == "12,346"
    assert num(2.5e18) == "2.500e+18"
    assert num(0.0) == "0" and num(None) == "n/a" and num(7) == "7"


def test_fmt_never_rounds_a_non_zero_figure_to_zero():
    assert fmt(0.00001) == "1.0e-05"            # was "0.00"
    assert fmt(0.0004, 3) == "4.00e-04"
    assert fmt(0.0) == "0.00" and fmt(12.345) == "12.35" and fmt(1.5, 3) == "1.500"   # as before
    assert fmt(3e15) == "3.0e+15"


def _cost(usd_per_hour: float) -> dict:
    done = [rec(i, out=100) for i in range(10)]
    return cost_block({"usd_per_hour": usd_per_hour, "accelerators": 1}, 10.0, done, None,
                      "no SLO", None)


def test_a_tiny_price_is_never_shown_as_zero_dollars():
    c = _cost(1e-320)                           # underflows to 0.0 in the arithmetic
    assert c["usd_per_million_output_tokens"] == 0.0
    line = cost_line({"cost": c})
    assert not re.search(r"(?<!> )\$0/M", line), line        # never a bare "$0/M"
    assert "> $0/M output tok (below the float range: price 1.000e-320)" in line
    md = render_md(cost_blocks({"cost": c}))
    assert "| $ / million output tokens (all-in) | > $0 (below the float range" in md
    small = cost_line({"cost": _cost(1e-9)})    # tiny but representable: its digits
    assert "$2.778e-09/M output tok" in small


def test_a_free_price_is_zero_dollars():
    assert "$0/M output tok" in cost_line({"cost": _cost(0.0)})


def test_a_server_run_that_sent_nothing_names_no_none_either():
    recs = [rec(0, sched=0, sent=None, status="cancelled", error_kind="cancelled")]
    v = verdict(recs, server_meta(scheduled_rate=None))
    text = "; ".join(v["reasons"])
    assert "n/a" not in text and "None" not in text, text
    assert "send rate not checked: fewer than two measured sends at distinct times" in text
    assert "p99 schedule lag: no data" in text
