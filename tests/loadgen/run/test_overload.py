"""Open-loop overload on a real ``python -m loadgen run`` (issue 29 item 2): 10^6 requests at
10^6/s are built as they are sent (memory holds what is in flight: the process's own peak RSS,
VmHWM, stays small), records reach the disk as they end (a kill -9 keeps them), the first SIGINT
stops the run with every record kept, a second one stops it at once, a signal in the set-up
phase (the fit check building 2,000 prompts of 1,048,576 tokens) ends it, and a plan that needs
more file descriptors than the limit allows says so up front in one line."""
import json
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PEAK_MB = 700           # the old runner built every request first: gigabytes within seconds
CHILD_PEAK_MB = 250     # a --procs child of the overload below (10,000 descriptors in flight)


def start(tmp_path, load, preexec=None, args=(), **kw) -> tuple[subprocess.Popen, Path]:
    sc = {"name": "overload", "target": {"url": kw.pop("url")},
          "api": {"probe": kw.pop("probe", False),
                  "extra_body": {"calib": {"ttft_ms": 50, "itl_ms": 5}}},
          "workload": {"tokenizer": "bytes",
                       "prompt_tokens": {"dist": "fixed", "value": kw.pop("prompt", 8)},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": load, "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", "run", str(p), "--json", *args],
                            cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=preexec)
    return proc, tmp_path / "run"


def lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def wait_for(cond, proc, bound_s: float = 90.0) -> None:
    deadline = time.monotonic() + bound_s
    while not cond():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def peak_mb(pid: int) -> float:
    for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def finish(proc, bound_s: float = 180.0) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=bound_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def whole_records(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    recs = [json.loads(x) for x in raw.splitlines()]
    assert len({r["id"] for r in recs}) == len(recs)        # each id once
    return recs


OVERLOAD = {"mode": "server", "rate": 1_000_000, "num_requests": 1_000_000}


def first_sigint_keeps_every_scheduled(proc, d: Path) -> None:
    """SIGINT the overload run: exit 130, one record per scheduled request, the never-sent ones
    ``cancelled`` with their scheduled time."""
    try:
        proc.send_signal(signal.SIGINT)
        out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    recs = whole_records(d / "records.jsonl")
    assert sorted(r["id"] for r in recs) == list(range(1_000_000))   # every scheduled one
    never = [r for r in recs if r["sent_at_ns"] is None]
    assert never and all(r["status"] == "cancelled" and r["scheduled_at_ns"] for r in never)


@pytest.mark.slow       # 10^6 records written at the SIGINT: minutes on a 2-core box
def test_overload_is_bounded_and_the_first_sigint_keeps_every_record(calib_server, tmp_path):
    proc, d = start(tmp_path, OVERLOAD, url=calib_server.url)
    try:
        wait_for(lambda: lines(d / "records.jsonl") >= 3000, proc)    # records as they end
        assert peak_mb(proc.pid) < PEAK_MB
    except BaseException:
        proc.kill()
        raise
    first_sigint_keeps_every_scheduled(proc, d)
    meta = json.loads((d / "meta.json").read_text())
    assert meta["interrupt_signal"] == "SIGINT"


@pytest.mark.slow       # 10^6 records written at the SIGINT: minutes on a 2-core box
def test_procs_children_build_their_slices_as_they_send(calib_server, tmp_path):
    """The same overload with --procs 2: no process holds the plan (the parent hands each child
    a few kB; a child builds each request of its slice as it sends it), every process's peak
    stays small, and the first SIGINT keeps a record for every scheduled request."""
    proc, d = start(tmp_path, OVERLOAD, url=calib_server.url, args=("--procs", "2"))
    try:
        wait_for(lambda: sum(lines(p) for p in d.glob("procs/records.*.jsonl")) >= 3000, proc)
        kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        senders = [int(k) for k in kids
                   if "loadgen.engine.procs.child" in Path(f"/proc/{k}/cmdline").read_text()]
        assert len(senders) == 2
        assert peak_mb(proc.pid) < PEAK_MB
        for pid in senders:             # a child holding its slice: ~390 MB; built as sent: ~150
            assert peak_mb(pid) < CHILD_PEAK_MB
    except BaseException:
        proc.kill()
        raise
    first_sigint_keeps_every_scheduled(proc, d)


@pytest.mark.slow       # 10^6 records written at the SIGINT: minutes on a 2-core box
def test_a_kill_keeps_what_was_done_and_a_second_sigint_stops_at_once(calib_server, tmp_path):
    proc, d = start(tmp_path, OVERLOAD, url=calib_server.url)
    try:
        wait_for(lambda: lines(d / "records.jsonl") >= 2000, proc)
        proc.send_signal(signal.SIGINT)
        wait_for(lambda: lines(d / "records.jsonl") >= 20000, proc)  # writing the remainder
        proc.send_signal(signal.SIGINT)
        out, err = finish(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    whole_records(d / "records.jsonl")
    assert json.loads((d / "meta.json").read_text())["interrupted"] is True

    (tmp_path / "k").mkdir()
    proc, d = start(tmp_path / "k", OVERLOAD, url=calib_server.url)
    wait_for(lambda: lines(d / "records.jsonl") >= 2000, proc)
    proc.kill()
    proc.communicate()
    recs = whole_records(d / "records.jsonl")
    assert len(recs) >= 2000 and all(r["phase"] == "measured" for r in recs)


@pytest.mark.parametrize("sigs", [[signal.SIGINT], [signal.SIGTERM]])
def test_a_signal_while_a_huge_plan_is_checked_ends_the_run(calib_server, tmp_path, sigs):
    load = {"mode": "server", "rate": 1000, "num_requests": 100_000}
    proc, d = start(tmp_path, load, url=calib_server.url, probe=True, prompt=1_048_576)
    try:
        wait_for(lambda: (d / "scenario.yaml").exists(), proc)   # readiness, probe, fit check
        for s in sigs:
            proc.send_signal(s)
        out, err = finish(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (130, 2), err    # 2: the fit check refused it before the signal
    assert "Traceback" not in err


def _nofile(soft: int, hard: int):
    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return pre


def test_too_few_descriptors_are_said_up_front_in_one_line(calib_server, tmp_path):
    load = {"mode": "concurrency", "concurrency": 2000, "num_requests": 40}
    proc, d = start(tmp_path, load, preexec=_nofile(256, 256), url=calib_server.url)
    out, err = finish(proc, 120)
    warn = [ln for ln in err.splitlines() if "RLIMIT_NOFILE" in ln]
    assert len(warn) == 1 and "--procs" in warn[0] and "2,000" in warn[0], err
    assert proc.returncode == 0, err
    assert json.loads(out)["summary"]["requests_completed"] == 40


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_the_soft_descriptor_limit_is_raised_to_the_hard_one(calib_server, tmp_path):
    load = {"mode": "concurrency", "concurrency": 600, "num_requests": 1200}
    proc, d = start(tmp_path, load, preexec=_nofile(128, 4096), url=calib_server.url)
    out, err = finish(proc, 120)
    assert proc.returncode == 0, err
    assert "RLIMIT_NOFILE" not in err
    recs = whole_records(d / "records.jsonl")
    assert all(r["status"] == "ok" for r in recs), {r["error"] for r in recs}
