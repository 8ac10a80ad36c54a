"""``loadgen report RUN_DIR`` on real run directories (runs against the calibration server):
a run without a clean end is INVALID with the reason and the count of requests without a record
(issue 29 item 4); ``--device`` never overwrites the run's own summary.json (item 10)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from loadgen.record import read_records

ROOT = Path(__file__).resolve().parents[3]


def scenario(calib_server, tmp_path, name, load, ttft_ms=0) -> Path:
    sc = {"name": "rep", "target": {"url": calib_server.url},
          "api": {"probe": False, "extra_body": {"calib": {"ttft_ms": ttft_ms, "itl_ms": 1}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": load, "output": {"dir": str(tmp_path), "run_name": name, "report": "none"}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(sc))
    return p


def loadgen(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadgen.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def report_json(run_dir: Path) -> tuple[dict, subprocess.CompletedProcess]:
    r = loadgen("report", str(run_dir), "--json", "--no-plots")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout), r


def measured(run_dir: Path) -> int:
    p = run_dir / "records.jsonl"
    return sum(1 for r in read_records(p) if r["phase"] == "measured") if p.is_file() else 0


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_run_killed_with_sigkill_is_invalid_with_the_count(calib_server, tmp_path):
    sc = scenario(calib_server, tmp_path, "killed",
                  {"mode": "concurrency", "concurrency": 1, "num_requests": 50}, ttft_ms=100)
    proc = subprocess.Popen([sys.executable, "-m", "loadgen.cli", "run", str(sc), "--json"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = tmp_path / "killed"
    try:
        deadline = time.monotonic() + 120
        while measured(d) < 5:            # a few records, well before the 50th
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (d / "meta.json").exists()
    n = measured(d)
    assert 5 <= n < 50
    s, r = report_json(d)
    v = s["verdict"]
    assert v["valid"] is False
    assert v["requests_without_record"] == 50 - n
    assert any("no meta.json" in x and f"{50 - n} of 50 planned" in x for x in v["reasons"])
    checks = {c["name"]: c for c in v["checks"]}
    assert checks["ended_cleanly"]["ok"] is False
    assert checks["not_interrupted"]["ok"] is False        # nothing says it was not
    assert "verdict: INVALID" in r.stderr and "no meta.json" in r.stderr
    loadgen("report", str(d), "--no-plots")
    assert f"{50 - n} of 50 planned measured requests have no record" in (
        d / "report.md").read_text()


def finished(calib_server, tmp_path, name="done", n=30) -> Path:
    sc = scenario(calib_server, tmp_path, name, {"mode": "server", "rate": 200,
                                                 "num_requests": n, "warmup_requests": 2})
    r = loadgen("run", str(sc), "--json")
    assert r.returncode == 0, r.stderr
    return tmp_path / name


def test_a_clean_run_stays_valid_and_lost_records_make_it_invalid(calib_server, tmp_path):
    d = finished(calib_server, tmp_path)
    s, _ = report_json(d)
    assert s["verdict"]["requests_without_record"] == 0
    assert {c["name"]: c["ok"] for c in s["verdict"]["checks"]}["ended_cleanly"] is True
    # the host's load over the measured phase is recorded beside the client's (item 12)
    host = json.loads((d / "meta.json").read_text())["host_load"]
    assert host["busy"] in (True, False) and host["ncpu"] == os.cpu_count()
    assert s["client"]["host"]["busy"] == host["busy"]
    # a disk that filled up: records.jsonl holds 12 of the 32 lines meta.json says were written
    lines = (d / "records.jsonl").read_text().splitlines(keepends=True)
    (d / "records.jsonl").write_text("".join(lines[:12]))
    s, _ = report_json(d)
    v = s["verdict"]
    assert v["valid"] is False and v["requests_without_record"] == 30 - 10
    assert any("20 of 30 planned measured requests have no record" in x for x in v["reasons"])
    assert any("holds 12 records of the 32" in x for x in v["reasons"])
    # ... and one where meta.json itself could not be written
    (d / "meta.json").unlink()
    v = report_json(d)[0]["verdict"]
    assert v["valid"] is False and v["requests_without_record"] == 20
    assert any("no meta.json" in x for x in v["reasons"])


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_device_override_is_written_beside_the_runs_summary(calib_server, tmp_path):
    d = finished(calib_server, tmp_path, "dev", n=10)
    loadgen("report", str(d), "--no-plots")
    own = {f: (d / f).read_bytes() for f in ("summary.json", "report.md")}
    r = loadgen("report", str(d), "--device", "h100-sxm", "--no-plots")
    assert r.returncode == 0, r.stderr
    assert {f: (d / f).read_bytes() for f in own} == own          # the run's files untouched
    assert (json.loads(own["summary.json"])["roofline"]["device"] or {}).get("source") is None
    beside = json.loads((d / "summary-device-h100-sxm.json").read_text())
    assert beside["roofline"]["device"]["source"] == "override"
    assert "Recomputed against --device h100-sxm" in (d / "report-device-h100-sxm.md").read_text()
    assert "summary-device-h100-sxm.json" in r.stdout


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_device_override_of_a_sweep_is_written_beside_its_report(calib_server, tmp_path):
    sc = scenario(calib_server, tmp_path, "sw", {"mode": "concurrency", "concurrency": 1,
                                                 "num_requests": 3})
    tree = yaml.safe_load(sc.read_text())
    tree["sweep"] = {"param": "load.concurrency", "values": [1, 2]}
    sc.write_text(yaml.safe_dump(tree))
    assert loadgen("sweep", str(sc), "--json").returncode == 0
    d = tmp_path / "sw"
    loadgen("report", str(d), "--no-plots")
    own = {p: p.read_bytes() for p in [d / "report.md", *d.glob("*/summary.json")]}
    r = loadgen("report", str(d), "--device", "h100-sxm", "--no-plots")
    assert r.returncode == 0, r.stderr
    assert {p: p.read_bytes() for p in own} == own
    md = (d / "report-device-h100-sxm.md").read_text()
    assert "Roofline recomputed against --device h100-sxm (catalogue)" in md
    assert "Roofline recomputed" not in (d / "report.md").read_text()
