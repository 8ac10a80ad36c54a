"""Storage faults (loadgen.run.storage, RecordWriter): output.dir checked before the run, no torn
line in records.jsonl when the disk fills, JSON files replaced atomically, one line and exit 1."""
import errno
import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadgen.record import Record, RecordWriter
from loadgen.run.storage import LineWriter, StorageError, atomic_write_text

ROOT = Path(__file__).resolve().parents[3]


class FullDisk:
    """A raw binary file with ``room`` bytes of space: a write takes what fits, then ENOSPC."""

    def __init__(self, room: int):
        self.room, self.data, self.closed = room, bytearray(), False

    def seek(self, pos, whence=0):
        return len(self.data)

    def write(self, b) -> int:
        free = self.room - len(self.data)
        if free <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = min(free, len(b))
        self.data += bytes(b[:n])
        return n

    def truncate(self, size: int) -> int:
        del self.data[size:]
        return size

    def close(self):
        self.closed = True


def test_a_full_disk_leaves_whole_lines_only():
    f = FullDisk(room=25)
    w = LineWriter(f)
    assert w.write(b"0123456789\n") == 1
    with pytest.raises(StorageError, match=r"records.jsonl: write failed \(No space left on device\) "
                                           "after 2 lines"):
        w.write(b"abcdefghij\nklmnopqrstuvwxyz\n")   # the first line fits, the second is torn
    assert bytes(f.data) == b"0123456789\nabcdefghij\n"
    with pytest.raises(StorageError):                  # every later write refuses
        w.write(b"x\n")
    assert bytes(f.data) == b"0123456789\nabcdefghij\n"


def test_record_writer_on_a_full_disk():
    f = FullDisk(room=2000)
    w = RecordWriter("records.jsonl", file=f)
    n = 0
    with pytest.raises(StorageError):
        for i in range(100):
            w.write(Record(id=i, phase="measured", scheduled_at_ns=i, chunks=[[1, 1]] * 5))
            n += 1
    assert w.failed is not None and w.count == n
    lines = bytes(f.data).decode().splitlines(keepends=True)
    assert len(lines) == n and all(ln.endswith("\n") and json.loads(ln)["id"] == i
                                   for i, ln in enumerate(lines))
    with pytest.raises(StorageError):
        w.write_many([Record(id=999, phase="measured", scheduled_at_ns=0)])


def _limited(limit: int):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # EFBIG instead of a core dump
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


def test_atomic_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "meta.json"
    target.write_text('{"old": true}\n')
    code = ("import sys; from loadgen.run.storage import atomic_write_text, StorageError\n"
            "try:\n    atomic_write_text(sys.argv[1], 'x' * 200000)\n"
            "except StorageError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(target)], cwd=ROOT, capture_output=True,
                         text=True, preexec_fn=_limited(65536), timeout=60)
    assert "meta.json: could not be written (File too large)" in out.stdout, out.stderr
    assert target.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]     # no temp file left
    atomic_write_text(target, '{"new": 1}\n')
    assert target.read_text() == '{"new": 1}\n'


def scenario_file(tmp_path, calib_url, output, load=None):
    sc = {"name": "disk", "target": {"url": calib_url},
          "api": {"probe": False, "extra_body": {"calib": {}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": load or {"mode": "concurrency", "concurrency": 2, "num_requests": 400},
          "output": {"report": "none", **output}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    return p


def test_disk_full_mid_run_ends_cleanly(calib_server, tmp_path):
    p = scenario_file(tmp_path, calib_server.url, {"dir": str(tmp_path / "runs"), "run_name": "r"})
    out = subprocess.run([sys.executable, "-m", "loadgen.cli", "run", str(p), "--json"], cwd=ROOT,
                         capture_output=True, text=True, preexec_fn=_limited(60_000), timeout=120)
    assert out.returncode == 1, out.stderr
    err = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr
    assert any("records.jsonl: write failed (File too large)" in ln for ln in err), err
    d = tmp_path / "runs" / "r"
    raw = (d / "records.jsonl").read_bytes()
    assert raw.endswith(b"\n") and 0 < raw.count(b"\n") < 400
    ids = [json.loads(ln)["id"] for ln in raw.splitlines()]          # no torn line anywhere
    assert len(set(ids)) == len(ids)
    meta = json.loads((d / "meta.json").read_text())                 # whole, never 0 bytes
    assert "records.jsonl" in meta["crashed"]
    for name in ("summary.json", "scenario.yaml"):
        if (d / name).exists():
            assert (d / name).stat().st_size > 0
    assert not [q.name for q in d.iterdir() if q.name.endswith(".tmp")]


@pytest.mark.parametrize("sub,needle", [
    ("", "is not a directory"),                  # output.dir is a file
    ("sub", "output.dir: cannot create"),        # ... or under one
])
def test_output_dir_is_checked_before_the_run(calib_server, tmp_path, sub, needle):
    (tmp_path / "out").write_text("x")
    out_dir = tmp_path / "out" / sub if sub else tmp_path / "out"
    p = scenario_file(tmp_path, calib_server.url, {"dir": str(out_dir)})
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "run", str(p)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and needle in r.stderr and "output.dir" in r.stderr
