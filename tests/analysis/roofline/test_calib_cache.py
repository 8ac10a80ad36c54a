"""analysis/roofline/calib_cache.py: the host's calibration cache is shared by every process on it
(issue 29 item 11): saves are locked, versioned and atomic, the lock's wait is bounded, and a
spec says which save it is."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.roofline import calib_cache, devices
from tests.analysis.synth import spec_file

ROOT = Path(__file__).resolve().parents[3]

WRITER = """
import sys
from analysis.roofline import calib_cache, devices
spec = devices.load_spec(sys.argv[2])
for _ in range(int(sys.argv[3])):
    calib_cache.save(spec, sys.argv[1])
"""

HOLDER = """
import sys
from analysis.roofline import calib_cache
with calib_cache.lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def spec(tmp_path) -> Path:
    p = spec_file(tmp_path / "spec.json", bandwidth=1.2e10)
    d = json.loads(p.read_text())
    d["meta"] = {"host": "h", "date": "2026-12-04T10:00:00+00:00", "evidence": "measured",
                 "host_load": {"busy": False, "reasons": []}}
    p.write_text(json.dumps(d))
    return p


def test_processes_saving_at_once_lose_no_version_and_never_show_half_a_file(tmp_path):
    cache, n = tmp_path / "cache" / "calibration.json", 40
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(cache), str(spec(tmp_path)),
                               str(n)], cwd=ROOT) for _ in range(2)]
    reads = 0
    while any(p.poll() is None for p in procs):      # read while they write: whole files only
        if cache.is_file():
            json.loads(cache.read_text())           # a torn file raises here
            reads += 1
    assert [p.wait() for p in procs] == [0, 0]
    meta = devices.load_spec(cache).meta["cache"]
    assert meta["version"] == 2 * n                 # every read-increment-write under the lock
    assert meta["path"] == str(cache) and meta["saved_by_pid"] in {p.pid for p in procs}
    assert not [f for f in cache.parent.iterdir() if f.name.endswith(".tmp")]


def test_the_lock_wait_is_bounded_and_released_with_its_holder(tmp_path):
    cache = tmp_path / "calibration.json"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(cache)], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(calib_cache.CacheBusy, match="another process held its lock"):
            with calib_cache.lock(cache, timeout_s=0.2):
                pass
    finally:
        holder.communicate("go\n", timeout=30)
    with calib_cache.lock(cache, timeout_s=30):     # released when its holder let go
        pass


def test_provenance_names_the_save_and_the_host_load(tmp_path):
    s = devices.load_spec(spec(tmp_path))
    calib_cache.save(s, tmp_path / "c.json")
    calib_cache.save(s, tmp_path / "c.json")
    p = calib_cache.provenance(devices.load_spec(tmp_path / "c.json"), by_this_run=False)
    assert p["version"] == 2 and p["saved_by_pid"] == os.getpid()
    assert p["path"] == str(tmp_path / "c.json") and p["busy"] is False
    assert p["measured_at"] == "2026-12-04T10:00:00+00:00" and p["by_this_run"] is False
    assert calib_cache.provenance(devices.get("h100-sxm"), True) is None    # a catalogue entry
