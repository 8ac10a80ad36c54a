"""Reports written whole or not at all (analysis.report.output, analysis.atomic): a REAL write
failure (RLIMIT_FSIZE with SIGXFSZ ignored, so a write past the limit fails with EFBIG) while
`loadgen report` or the run's end-of-run step writes report.html leaves no truncated file,
report.error.txt says why, one line names the file and `loadgen report RUN_DIR`, exit 1."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.metrics.summary import write_summary
from analysis.report.render import render_html, render_md
from analysis.report.run_report import build_sections
from tests.analysis.synth import server_meta, steady, write_run

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 64 * 1024        # above summary.json, report.md (~11 kB, ~6 kB), below report.html (plots)


def _limited(limit: int = LIMIT):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # EFBIG instead of a core dump
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _run_dir(tmp_path: Path) -> Path:
    d = write_run(tmp_path / "run", steady(20), server_meta())
    write_summary(d)
    assert (d / "summary.json").stat().st_size < LIMIT       # the report, not summary.json, fails
    (d / "summary.json").unlink()
    return d


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}


def _no_torn_report(d: Path) -> None:
    names = sorted(p.name for p in d.iterdir())
    assert "report.html" not in names                        # never half a page
    assert not [n for n in names if n.endswith(".tmp")], names   # no temp file left behind
    err = (d / "report.error.txt").read_text()
    assert "report.html: could not be written (File too large)" in err
    assert f"loadgen report {d}" in err


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_loadgen_report_on_a_full_disk_leaves_no_torn_report(tmp_path):
    d = _run_dir(tmp_path)
    out = subprocess.run([sys.executable, "-m", "loadgen.cli", "report", str(d)], cwd=ROOT,
                         env=_env(), capture_output=True, text=True, preexec_fn=_limited,
                         timeout=120)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("loadgen: error:")]
    assert len(errors) == 1, out.stderr
    assert "report.html: could not be written (File too large)" in errors[0]
    assert f"`loadgen report {d}`" in errors[0]
    _no_torn_report(d)
    assert (d / "summary.json").is_file() and (d / "records.jsonl").is_file()   # the data stays


def test_write_report_on_a_full_disk_replaces_neither_file(tmp_path):
    """write_report (what the run's end and `loadgen report` call), without plots; the limit between report.md's and
    report.html's sizes (worked out here first), so report.md could be written and report.html
    not: neither replaces the older report (both or neither); summary.json was written before
    the limit (the report fails, not the summary)."""
    d = _run_dir(tmp_path)
    write_summary(d)
    (d / "report.md").write_text("older report\n")
    blocks = build_sections(d, with_plots=False)[0]
    md, page = len(render_md(blocks).encode()), len(render_html(blocks).encode())
    assert md + 512 < page
    code = ("import sys\nfrom pathlib import Path\n"
            "from analysis.report.run_report import write_report\n"
            "from loadgen.run.storage import StorageError\n"
            "try:\n    write_report(Path(sys.argv[1]), with_plots=False)\n"
            "except StorageError as e:\n    print('StorageError:', e)\n    sys.exit(1)\n")
    limit = (md + page) // 2
    out = subprocess.run([sys.executable, "-c", code, str(d)], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, preexec_fn=lambda: _limited(limit),
                         timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "report.html: could not be written (File too large)" in out.stdout
    assert f"`loadgen report {d}`" in out.stdout
    _no_torn_report(d)
    assert (d / "report.md").read_text() == "older report\n"      # not a new md beside no html


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_loadgen_run_on_a_full_disk_for_the_report_exits_1_not_valid(calib_server, tmp_path):
    """The whole run, against the calibration server: the load and summary.json fit, the report
    with its plots does not; the run ends with the one line and exit 1, records kept."""
    import yaml
    sc = {"name": "fsize", "target": {"url": calib_server.url},
          "api": {"probe": False, "extra_body": {"calib": {}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 12},
          "output": {"dir": str(tmp_path / "runs"), "run_name": "r", "report": "full"}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    out = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p)], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, preexec_fn=_limited, timeout=300)
    d = tmp_path / "runs" / "r"
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("loadgen: error:")]
    assert len(errors) == 1 and "report.html: could not be written (File too large)" in errors[0]
    assert "VALID" not in out.stdout
    _no_torn_report(d)
    assert (d / "records.jsonl").read_text().count("\n") == 12
    assert (d / "summary.json").is_file() and (d / "meta.json").is_file()
