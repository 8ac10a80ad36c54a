"""``loadgen sweep`` as a user sees it when stdout is not a terminal (a pipe, CI, a file), issue
29 item 17: the table is not cut ("fa…", "VAL…"), and the prefix-cache warning of a later point
is on the console and in the sweep report, not only in summary.json."""
import subprocess
import sys
from pathlib import Path

import pytest

import yaml

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_piped_sweep_prints_whole_cells_and_the_cache_warning(calib_server, tmp_path):
    sc = {"name": "pipe", "target": {"url": calib_server.url}, "api": {"probe": False},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 3}},
          "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 4},
          "sweep": {"param": "load.concurrency", "values": [1, 2]},
          "output": {"dir": str(tmp_path), "run_name": "a-rather-long-sweep-directory-name",
                     "report": "none"}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "sweep", str(p)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={
                           **__import__("os").environ, "COLUMNS": ""})
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout, r.stdout
    rows = [ln for ln in r.stdout.splitlines() if "concurrency-" in ln and "warning" not in ln]
    assert len(rows) == 2 and all("VALID" in ln for ln in rows), r.stdout
    warn = "4 prompts of this point were sent to the same server earlier in this sweep"
    assert f"warning: concurrency-2: {warn}" in r.stdout          # under the table
    assert f"loadgen sweep: warning: concurrency-2: {warn}" in r.stderr     # as it happened
    d = tmp_path / "a-rather-long-sweep-directory-name"
    rep = subprocess.run([sys.executable, "-m", "loadgen.cli", "report", str(d), "--no-plots"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    md = (d / "report.md").read_text()
    assert f"2 (concurrency-2): {warn}" in md and "1 (concurrency-1)" not in md
