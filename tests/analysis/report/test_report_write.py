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

from analysis.metrics.summary import write_summary
from tests.analysis.synth import server_meta, steady, write_run

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 64 * 1024        # above summary.json, report.md (~11 kB, ~6 kB), below report.html (plots)


def _limited():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # EFBIG instead of a core dump
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


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


def test_end_of_run_report_on_a_full_disk_raises_one_storage_error(tmp_path):
    d = _run_dir(tmp_path)
    code = ("import json, sys\nfrom pathlib import Path\n"
            "from loadgen.run.rundir import summarize_dir\nfrom loadgen.run.storage import StorageError\n"
            "d = Path(sys.argv[1])\n"
            "try:\n    summarize_dir(d, json.loads((d / 'meta.json').read_text()), 'full')\n"
            "except StorageError as e:\n    print('StorageError:', e)\n    sys.exit(1)\n")
    out = subprocess.run([sys.executable, "-c", code, str(d)], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, preexec_fn=_limited, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "report.html: could not be written (File too large)" in out.stdout
    _no_torn_report(d)
