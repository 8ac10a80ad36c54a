"""A disk that fills for real (a 256 KiB tmpfs, mounted for the test): records.jsonl is the first
file to fail, so the one error line names it, not meta.json that cannot be written after it."""
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def tiny_disk(path: Path, size: str = "256k"):
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_the_full_disk_line_names_records_jsonl(calib_server, tmp_path):
    sc = {"name": "disk", "target": {"url": calib_server.url},
          "api": {"probe": False, "extra_body": {"calib": {}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 5000}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    with tiny_disk(tmp_path / "disk") as disk:
        out = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p), "--json",
                              "--set", f"output.dir={disk}", "--set", "output.run_name=r",
                              "--set", "output.report=none"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert out.returncode == 1, out.stderr
        assert "Traceback" not in out.stderr
        err = [ln for ln in out.stderr.splitlines() if ln.startswith("loadgen: error: ")]
        assert len(err) == 1 and "records.jsonl: write failed" in err[0], out.stderr
        assert "meta.json" not in err[0]
        raw = (disk / "r" / "records.jsonl").read_bytes()
        assert raw.endswith(b"\n") and 0 < raw.count(b"\n") < 5000
        assert len({json.loads(ln)["id"] for ln in raw.splitlines()}) == raw.count(b"\n")
        assert not [q for q in os.listdir(disk / "r") if q.endswith(".tmp")]
