"""The Locust engine against the calibration server: one record per request, true timings,
a killed worker accounted for. Locust (gevent) always runs in subprocesses, never in pytest."""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

# find_spec, not importorskip: importing locust monkey-patches this whole pytest process with
# gevent (sockets, threads, subprocess) for every test that runs after this module is collected.
if importlib.util.find_spec("locust") is None:
    pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')",
                allow_module_level=True)

from loadgen.engine.core.plan import Plan, owner
from loadgen.run.engines import check_flags
from loadgen.engine.locust.run import LocustOptions, run_locust
from loadgen.record import read_records
from loadgen.scenario.loader import load_scenario
from servers.calib import CalibrationServer
from tests.support.procs import interrupt, reaped

ROOT = Path(__file__).resolve().parents[4]
TTFT_MS, ITL_MS, TOKENS = 40.0, 5.0, 12


@pytest.fixture(scope="module")
def timed_server():
    with CalibrationServer(ttft_ms=TTFT_MS, itl_ms=ITL_MS) as s:
        yield s


def _scenario(tmp_path: Path, url: str, load: dict, name: str = "lc", **extra) -> Path:
    tree = {"name": name, "target": {"url": url}, "api": {"model": "calib-model"},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 12},
                         "output_tokens": {"dist": "fixed", "value": TOKENS}, "seed": 3},
            "load": load, "output": {"dir": str(tmp_path / "runs"), "run_name": name,
                                     "report": "none"}}
    for k, v in extra.items():
        tree[k] = v
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(tree))
    return p


def _run(path: Path, workers=None, progress=None):
    sc = load_scenario(path)
    return run_locust(sc, LocustOptions(workers=workers, scenario_path=str(path),
                                        connect_timeout_s=60.0), progress)


def _run_in_thread(path: Path) -> tuple[Path, threading.Thread, dict]:
    """The run on 2 workers in a started thread: (its locust/ directory, the thread, a dict that
    holds its result under "res" once done)."""
    sc = load_scenario(path)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("res", _run(path, workers=2)))
    t.start()
    return Path(sc.output.dir) / sc.output.run_name / "locust", t, out


def _token_times(chunks) -> list[int]:
    """Each token's stamp, in order (a chunk of n tokens: n entries)."""
    return [t for t, n in chunks for _ in range(n)]


def _server_truth(server) -> dict:
    """prompt tag -> (the server's arrival stamp, each token's write stamp: taken just before
    the write, so a true receive stamp is never earlier)."""
    return {e["prompt"]: (e["arrival_ns"], _token_times(e["chunks"]))
            for e in server.log(clear=True)}


def _check_exactly_once(recs: list[dict], n: int) -> None:
    ids = [r["id"] for r in recs]
    assert sorted(ids) == list(range(n)), "every scheduled request has exactly one record"


def _check_truth(recs: list[dict], truth: dict, prompts: dict) -> None:
    """Causal checks against the server's own stamps (one clock: perf_counter_ns is
    CLOCK_MONOTONIC for every process on this host): each request sent before the server had
    it, each token stamped no earlier than the server wrote it, in order; and the reads are
    event by event (a client that stamps at the stream's end, as iter_content would, gives
    every token of a record one stamp). How CLOSE the stamps are is the held-out truth
    bench's measure (bench/timing_truth.py, against a packet capture), not a test's."""
    ok = [r for r in recs if r["status"] == "ok" and r["phase"] == "measured"]
    assert ok
    spread = []
    for r in ok:
        arrival, writes = truth[prompts[r["id"]][:120]]
        ours = _token_times(r["chunks"])
        assert r["output_tokens"] == TOKENS and r["chunk_output_tokens"] == TOKENS
        assert len(ours) == len(writes) == TOKENS and r["first_token_at_ns"] == ours[0]
        assert r["sent_at_ns"] <= arrival, r["id"]                  # sent before it arrived
        assert all(o >= w for o, w in zip(ours, writes)), r["id"]  # never before its write
        assert ours == sorted(ours)
        spread.append(len(set(ours)))
    assert max(spread) > 1, "every record's tokens share one stamp: not read event by event"


def _prompts(path: Path) -> dict:
    plan = Plan(load_scenario(path))
    n = plan.warmup + (plan.count or 0)
    return {i: p.prompt for i, p in zip(range(n), iter(plan.workload))}


def test_flag_combinations():
    assert check_flags("native", None, False, False, None) is None
    assert check_flags("locust", None, False, False, None) is None
    assert check_flags("locust", 2, False, False, None) is None
    assert check_flags("locust", None, False, True, "h") is None
    assert check_flags("locust", 3, True, False, None) is None
    assert "--engine locust" in check_flags("native", 2, False, False, None)
    assert "--master-host" in check_flags("locust", None, False, True, None)
    assert "exclude" in check_flags("locust", 2, True, True, "h")
    assert "--workers N" in check_flags("locust", None, True, False, None)
    assert ">= 1" in check_flags("locust", 0, False, False, None)
    assert "--master-host applies" in check_flags("locust", None, False, False, "h")


def test_plan_slices_cover_every_id_once(tmp_path):
    p = _scenario(tmp_path, "http://127.0.0.1:1", {"mode": "server", "rate": 10,
                                                   "num_requests": 23, "warmup_requests": 5})
    sc = load_scenario(p)
    seen = []
    for w in range(3):
        plan = Plan(sc, w, 3)
        ids = [s.id for s in plan.warm_specs()] + [s.id for s in plan.measured_specs()]
        assert all(owner(i, 5, 3) == w for i in ids)
        seen += ids
    assert sorted(seen) == list(range(28))
    whole = Plan(sc)
    offs = {s.id: s.offset_ns for s in whole.measured_specs()}
    assert {s.id: s.offset_ns for s in Plan(sc, 1, 3).measured_specs()}.items() <= offs.items()


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_local_server_mode_matches_truth(tmp_path, timed_server):
    timed_server.clear()
    p = _scenario(tmp_path, timed_server.url, {"mode": "server", "rate": 25, "num_requests": 30,
                                               "warmup_requests": 2, "arrival": "poisson"})
    res = _run(p)
    recs = read_records(res.run_dir / "records.jsonl")
    _check_exactly_once(recs, 32)
    assert all(r["status"] == "ok" and r["worker"] == "0" for r in recs)
    _check_truth(recs, _server_truth(timed_server), _prompts(p))
    for f in ("scenario.yaml", "records.jsonl", "meta.json", "sut.json", "summary.json"):
        assert (res.run_dir / f).is_file(), f
    meta = json.loads((res.run_dir / "meta.json").read_text())
    assert meta["engine"] == "locust" and meta["mode"] == "server"
    assert res.summary["requests_completed"] == 30
    lag = [r["sent_at_ns"] - r["scheduled_at_ns"] for r in recs if r["phase"] == "measured"]
    assert min(lag) >= 0                  # paced to the schedule: none sent before its time


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_two_workers_every_request_once_and_true(tmp_path, timed_server):
    timed_server.clear()
    p = _scenario(tmp_path, timed_server.url, {"mode": "server", "rate": 30, "num_requests": 40,
                                               "warmup_requests": 2, "arrival": "constant"})
    from loadgen.console.progress import RunProgress
    progress = RunProgress(None, enabled=False)
    res = _run(p, workers=2, progress=progress)
    recs = read_records(res.run_dir / "records.jsonl")
    _check_exactly_once(recs, 42)
    assert [r.get("error") for r in recs if r["status"] != "ok"] == []
    assert (progress.completed, progress.sent, progress.total) == (42, 42, 42)  # live counts
    assert {r["worker"] for r in recs} == {"0", "1"}
    assert all(r["worker"] == str(owner(r["id"], 2, 2)) for r in recs)
    _check_truth(recs, _server_truth(timed_server), _prompts(p))
    # constant arrivals across both workers: scheduled gaps are exactly 1/rate
    sched = sorted(r["scheduled_at_ns"] for r in recs if r["phase"] == "measured")
    assert all(abs((b - a) / 1e6 - 1000 / 30) < 0.01 for a, b in zip(sched, sched[1:]))
    meta = res.meta
    assert meta["locust"]["worker_status"] == {"0": "done", "1": "done"}
    assert res.summary["requests_completed"] == 40
    cl, reps = meta["client_load"], meta["locust"]["worker_reports"]   # the one client_load
    assert cl["processes"] == 2 and cl["cpu_util"] == max(x["cpu_util"] for x in reps)
    assert cl["busiest_process"] in (0, 1) and cl["evidence"] == "measured"
    # every read kernel-stamped through the workers. GWire clients (meta client_transport)
    ct = meta["client_transport"]
    assert ct["transport"] == "gwire" and ct["stamp_source"] == "kernel", ct
    assert set(ct["workers"]) == {"0", "1"} and ct["kernel_stamped_reads"] == ct["reads"] > 0
    # each worker's clock: one host, so shift 0 exactly; the ping-pong ran anyway as a check
    clk = meta["locust"]["clock"]
    assert set(clk["workers"]) == {"0", "1"} and clk["max_uncertainty_ns"] == 0
    for c in clk["workers"].values():
        assert (c["method"], c["shift_ns"], c["uncertainty_ns"]) == ("same_host", 0, 0)
        pp = c["ping_pong"]
        assert pp["tries"] >= 1 and pp["rtt_min_ns"] >= 0
        assert abs(pp["offset_ns"]) <= pp["uncertainty_ns"] + 1   # one clock: within ± rtt/2


def test_closed_loop_concurrency(tmp_path, calib_server):
    p = _scenario(tmp_path, calib_server.url, {"mode": "concurrency", "concurrency": 3,
                                               "num_requests": 24})
    res = _run(p)
    recs = read_records(res.run_dir / "records.jsonl")
    _check_exactly_once(recs, 24)
    events = sorted([(r["sent_at_ns"], 1) for r in recs] + [(r["end_at_ns"], -1) for r in recs])
    live = peak = 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    assert peak <= 3
    assert all(r["scheduled_at_ns"] <= r["sent_at_ns"] for r in recs)


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("fault,kind", [("http500", "http"), ("drop", "connection"),
                                        ("no_done", "incomplete")])
def test_failed_requests_are_records(tmp_path, calib_server, fault, kind):
    p = _scenario(tmp_path, calib_server.url, {"mode": "concurrency", "concurrency": 2,
                                               "num_requests": 4},
                  api={"model": "calib-model", "extra_body": {"calib": {"fault": fault,
                                                                        "itl_ms": 1}}})
    res = _run(p)
    recs = read_records(res.run_dir / "records.jsonl")
    _check_exactly_once(recs, 4)
    assert {r["error_kind"] for r in recs} == {kind}
    assert all(r["status"] == "error" for r in recs)
    if kind == "http":   # the error body is kept; the connection is still usable afterwards
        assert all(r["http_status"] == 500 and "calibration http500" in r["error"] for r in recs)


def _poll(cond, bound_s: float, step_s: float = 0.01) -> bool:
    """Wait for ``cond()`` (True) for at most ``bound_s``; the condition's value."""
    deadline = time.monotonic() + bound_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(step_s)
    return True


def _has_ok(path: Path) -> bool:
    """A whole line of ``path`` records an ok request (the file may be mid-write)."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return any(b'"status":"ok"' in line for line in data[:data.rfind(b"\n") + 1].splitlines())


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_killed_worker_is_reported(tmp_path, timed_server):
    p = _scenario(tmp_path, timed_server.url, {"mode": "server", "rate": 20, "num_requests": 100,
                                               "arrival": "constant", "drain_timeout_s": 20})
    ldir, t, out = _run_in_thread(p)
    # worker 1 killed once it has written an ok record (polled, bounded): its finished records
    # must survive it; 5 s of schedule are still ahead, so some of its requests die with it
    part = ldir / "records.worker-1.jsonl"
    assert _poll(lambda: (ldir / "master.json").exists() and _has_ok(part), 120), \
        "worker 1 wrote no ok record"
    pid = json.loads((ldir / "worker-1.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    t.join(120)
    res = out["res"]
    recs = read_records(res.run_dir / "records.jsonl")
    _check_exactly_once(recs, 100)
    w1 = [r for r in recs if r["worker"] == "1"]
    assert any(r["status"] == "ok" for r in w1), "the dead worker's finished records are kept"
    dead = [r for r in w1 if r["status"] == "cancelled"]
    assert dead and all(r["error_kind"] == "cancelled" and "worker 1 died" in r["error"]
                        for r in dead)
    assert all(r["status"] == "ok" for r in recs if r["worker"] == "0")
    assert res.meta["locust"]["worker_status"]["1"] == "dead"
    assert res.meta["locust"]["merge"]["cancelled_for_dead_workers"] == len(dead)
    assert res.summary["requests_cancelled"] == len(dead)


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_a_worker_that_stalls_past_locusts_heartbeat_is_slow_not_dead(tmp_path, timed_server):
    """A busy host: a worker's process gets no CPU for 6 s (SIGSTOP) right after it is ready,
    longer than Locust's default liveness (3 missed 1-s heartbeats). The run waits for it: t0 is
    set, no crash, both workers done, every request ok (before: 'never_ready'/'dead', its
    requests cancelled, or the run ended before t0 with meta t0_ns None)."""
    p = _scenario(tmp_path, timed_server.url, {"mode": "server", "rate": 5, "num_requests": 20,
                                               "arrival": "constant", "warmup_requests": 2})
    ldir, t, out = _run_in_thread(p)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (ldir / "worker-1.json").exists():
        time.sleep(0.005)
    pid = None
    while pid is None and time.monotonic() < deadline:
        try:                                   # written by the worker: may be mid-write
            pid = json.loads((ldir / "worker-1.json").read_text())["pid"]
        except ValueError:
            time.sleep(0.005)
    os.kill(pid, signal.SIGSTOP)               # ready, and 4 s of schedule still ahead of it
    try:
        time.sleep(6.0)                        # the stall itself (what is tested), not a wait
    finally:
        os.kill(pid, signal.SIGCONT)
    t.join(240)
    res = out["res"]
    assert res.meta["crashed"] is None and res.meta["t0_ns"] is not None
    assert res.meta["locust"]["worker_status"] == {"0": "done", "1": "done"}
    recs = read_records(res.run_dir / "records.jsonl")
    _check_exactly_once(recs, 22)
    assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs if r["error"]]


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_remote_worker_forwards_records(tmp_path, calib_server):
    """--worker on 'another machine': its records reach the master's dir through messages."""
    from loadgen.targets.managed import free_port
    p = _scenario(tmp_path, calib_server.url, {"mode": "concurrency", "concurrency": 2,
                                               "num_requests": 10})
    port, mdir, wdir = free_port(), tmp_path / "master", tmp_path / "remote"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    base = [sys.executable, "-m", "loadgen.engine.locust.worker", "--scenario", str(p),
            "--master-port", str(port)]
    m = subprocess.Popen(base + ["--role", "master", "--workers", "1", "--run-dir", str(mdir),
                                 "--base-url", calib_server.url, "--model", "calib-model"],
                         env=env, stderr=subprocess.DEVNULL)
    w = subprocess.Popen(base + ["--role", "worker", "--records-dir", str(wdir), "--forward"],
                         env=env, stderr=subprocess.DEVNULL)
    try:
        assert m.wait(60) == 0
        w.wait(20)
    finally:
        for proc in (m, w):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    got = read_records(mdir / "records.worker-0.jsonl")
    assert sorted(r["id"] for r in got) == list(range(10))
    assert read_records(wdir / "records.worker-0.jsonl") == got
    assert len(read_records(mdir / "sent.worker-0.jsonl")) == 10


def test_locust_side_imports_no_asyncio_or_aiohttp():
    """gevent-patched processes must not load the asyncio/aiohttp world (locust issue 1251)."""
    code = ("from gevent import monkey; monkey.patch_all()\n"
            "import sys\n"
            "import loadgen.engine.locust.worker, loadgen.engine.locust.coordinator\n"
            "import loadgen.engine.locust.locustfile, loadgen.engine.core.journal\n"
            "bad = [m for m in ('aiohttp', 'asyncio', 'loadgen.client.http_client', 'loadgen.run.runner')\n"
            "       if m in sys.modules]\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("seed", [None, 11])
def test_plan_matches_native_runner_schedule(tmp_path, seed):
    import numpy as np

    from loadgen.run.runner import Run
    load = {"mode": "server", "rate": 7, "num_requests": 15, "warmup_requests": 2}
    if seed is not None:
        load["seed"] = seed
    sc = load_scenario(_scenario(tmp_path, "http://127.0.0.1:1", load))
    native, ours = Run(sc), Plan(sc)
    assert np.array_equal(native.schedule.offsets_ns, ours.schedule.offsets_ns)
    assert native.plan.take(17) == ours.workload.take(17)


def test_same_records_and_summary_shape_as_native(tmp_path, calib_server):
    from loadgen.run.runner import run_scenario
    load = {"mode": "server", "rate": 40, "num_requests": 16, "warmup_requests": 1}
    pn = _scenario(tmp_path, calib_server.url, load, name="native")
    pl = _scenario(tmp_path, calib_server.url, load, name="locust")
    nat = run_scenario(load_scenario(pn))
    loc = _run(pl, workers=2)
    rn = {r["id"]: r for r in read_records(nat.run_dir / "records.jsonl")}
    rl = {r["id"]: r for r in read_records(loc.run_dir / "records.jsonl")}
    assert rn.keys() == rl.keys()
    assert all(set(rn[i]) == set(rl[i]) for i in rn)
    t0n, t0l = nat.meta["t0_ns"], loc.meta["t0_ns"]
    for i in rn:
        for k in ("phase", "requested_output_tokens", "workload_prompt_tokens", "status",
                  "output_tokens", "chunk_output_tokens", "finish_reason"):
            assert rn[i][k] == rl[i][k], (i, k)
        if rn[i]["phase"] == "measured":
            assert rn[i]["scheduled_at_ns"] - t0n == rl[i]["scheduled_at_ns"] - t0l
    assert set(nat.meta) <= set(loc.meta)
    assert set(nat.summary) == set(loc.summary)


def test_clock_shift_onto_the_masters_clock():
    from loadgen.engine.core.clock import boot_id, clock_pair, clock_shift, rebase
    from loadgen.record import Record
    here = clock_pair()
    assert clock_shift(here) == 0                     # same kernel: one CLOCK_MONOTONIC
    other = {"boot_id": "another-host", "mono_ns": here["mono_ns"] + 5_000_000_000,
             "wall_ns": here["wall_ns"]}              # its monotonic clock is 5 s ahead
    assert abs(clock_shift(other) - 5_000_000_000) < 50_000_000
    rec = rebase(Record(id=1, phase="measured", scheduled_at_ns=10, sent_at_ns=20,
                        chunks=[[30, 1]]), 100)
    assert (rec.scheduled_at_ns, rec.sent_at_ns, rec.end_at_ns, rec.chunks) == (110, 120, None,
                                                                                [[130, 1]])
    assert boot_id() is None or len(boot_id()) > 8


def _locustfile(tmp_path: Path, scenario: Path, users: int, run_time: str):
    """``locust -f <packaged locustfile> --headless`` on ``scenario``; run dir tmp_path/lf."""
    import loadgen.engine.locust as pkg
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOADGEN_SCENARIO=str(scenario),
               LOADGEN_RUN_DIR=str(tmp_path / "lf"))
    return subprocess.run([sys.executable, "-m", "locust", "-f",
                           str(Path(pkg.__file__).parent / "locustfile.py"), "--headless",
                           "-u", str(users), "-r", "10", "--run-time", run_time, "--only-summary"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_packaged_locustfile_headless(tmp_path, calib_server):
    """``locust -f <packaged locustfile>`` driven by LOADGEN_SCENARIO writes the same records."""
    p = _scenario(tmp_path, calib_server.url, {"mode": "concurrency", "concurrency": 2,
                                               "num_requests": 9, "warmup_requests": 1})
    out = _locustfile(tmp_path, p, users=2, run_time="60s")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "loadgen: 10 records" in out.stdout
    recs = read_records(tmp_path / "lf" / "records.jsonl")
    _check_exactly_once(recs, 10)
    assert all(r["status"] == "ok" for r in recs)


class _CloseDelimitedSSE:
    """A hand-written HTTP/1.1 server: no Content-Length, no chunking, CRLF SSE lines, events
    at 50/60/70 ms after the request, then [DONE] and close (the body ends at EOF)."""

    DELAYS_MS = (50, 60, 70)

    def __init__(self):
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = False
        self.writes: list[list[int]] = []       # per request: each event's write stamp (ns)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                part = conn.recv(65536)
                if not part:
                    return
                data += part
            head, body = data.split(b"\r\n\r\n", 1)
            n = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                      if h.lower().startswith(b"content-length")), 0)
            while len(body) < n:
                body += conn.recv(65536)
            t0 = time.perf_counter()
            if head.startswith(b"GET"):
                js = b'{"object":"list","data":[{"id":"m"}]}'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(js), js))
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Connection: close\r\n\r\n")
            stamps: list[int] = []
            self.writes.append(stamps)
            for d in self.DELAYS_MS:
                time.sleep(max(0.0, t0 + d / 1000 - time.perf_counter()))
                stamps.append(time.perf_counter_ns())     # the client's clock, before the write
                conn.sendall(b'data: {"choices":[{"index":0,"text":" x"}]}\r\n\r\n')
            conn.sendall(b'data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}'
                         b"\r\n\r\ndata: [DONE]\r\n\r\n")

    def close(self):
        self.stop = True
        self.sock.close()


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_event_by_event_stamps_and_close_delimited_body(tmp_path):
    srv = _CloseDelimitedSSE()
    try:
        p = _scenario(tmp_path, srv.url, {"mode": "concurrency", "concurrency": 1,
                                          "num_requests": 3},
                      api={"model": "m", "include_usage": False})
        res = _run(p)
    finally:
        srv.close()
    recs = read_records(res.run_dir / "records.jsonl")
    _check_exactly_once(recs, 3)
    firsts_before_last_write = 0
    for r, writes in zip(sorted(recs, key=lambda r: r["sent_at_ns"]), srv.writes[-3:]):
        assert r["status"] == "ok", r["error"]
        assert r["chunk_output_tokens"] == 3 and r["output_tokens_source"] == "chunks"
        ours = [t for t, k in r["chunks"] if k]
        # causal: each event stamped no earlier than the server wrote it (one clock), in order
        assert len(ours) == len(writes) == 3 and ours == sorted(ours)
        assert all(o >= w for o, w in zip(ours, writes)), (ours, writes)
        firsts_before_last_write += ours[0] < writes[-1]
    # each ~40-byte event is stamped when it arrives: a read that waits for 1024 bytes (or the
    # EOF of this close-delimited body) could stamp no event before the last one was written
    assert firsts_before_last_write, "every first event stamped after the last write"


def test_scenarios_the_workers_cannot_share_are_refused(tmp_path):
    from loadgen.scenario.model import ScenarioError
    p = _scenario(tmp_path, "http://127.0.0.1:1", {"mode": "concurrency", "concurrency": 3,
                                                   "num_requests": 9})
    with pytest.raises(ScenarioError, match="not a multiple of --workers 2"):
        _run(p, workers=2)
    with pytest.raises(ScenarioError, match="cannot keep --workers 4"):
        _run(p, workers=4)


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_packaged_locustfile_run_time_stop_keeps_one_record_each(tmp_path, calib_server):
    p = _scenario(tmp_path, calib_server.url, {"mode": "server", "rate": 10, "num_requests": 80,
                                               "arrival": "constant"})
    out = _locustfile(tmp_path, p, users=4, run_time="3s")
    assert "loadgen: 80 records" in out.stdout, out.stderr[-2000:]
    recs = read_records(tmp_path / "lf" / "records.jsonl")
    _check_exactly_once(recs, 80)
    ok = [r for r in recs if r["status"] == "ok"]
    assert 5 <= len(ok) < 80
    assert all(r["status"] == "cancelled" for r in recs if r["status"] != "ok")


def _cli(*argv, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "loadgen", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          **kw)


@pytest.mark.parametrize("flags,msg", [
    (["--workers", "2"], "--workers needs --engine locust"),
    (["--engine", "locust", "--worker"], "--worker needs --master-host"),
    (["--engine", "locust", "--master"], "--master needs --workers N"),
    (["--engine", "locust", "--workers", "0"], "--workers must be >= 1"),
])
def test_cli_bad_flag_combinations(tmp_path, flags, msg):
    p = _scenario(tmp_path, "http://127.0.0.1:1", {"mode": "server", "rate": 1,
                                                   "num_requests": 1})
    out = _cli("run", str(p), *flags)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"loadgen: error: {msg}"), lines


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_cli_runs_on_locust_with_two_workers(tmp_path, calib_server):
    p = _scenario(tmp_path, calib_server.url, {"mode": "server", "rate": 40, "num_requests": 12})
    out = _cli("run", str(p), "--engine", "locust", "--workers", "2", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["summary"]["requests_completed"] == 12 and not res["interrupted"]
    meta = json.loads((Path(res["run_dir"]) / "meta.json").read_text())
    assert meta["engine"] == "locust" and meta["locust"]["workers"] == 2


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_cli_interrupt_marks_the_rest_cancelled(tmp_path, timed_server):
    p = _scenario(tmp_path, timed_server.url, {"mode": "server", "rate": 10, "num_requests": 60,
                                               "arrival": "constant"})
    run_dir = tmp_path / "runs" / "lc"
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", "run", str(p), "--engine", "locust",
                             "--workers", "2", "--json"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    with reaped(proc):
        ldir = run_dir / "locust"        # SIGINT once a worker has an ok record (polled):
        assert _poll(lambda: (ldir / "master.json").exists()        # 5 s of schedule remain
                     and any(_has_ok(f) for f in ldir.glob("records.worker-*.jsonl")), 120), \
            "no ok record from either worker"
        out, err = interrupt(proc, 60)
    assert proc.returncode == 130, err[-2000:]
    recs = read_records(run_dir / "records.jsonl")
    _check_exactly_once(recs, 60)
    ok = [r for r in recs if r["status"] == "ok"]
    never = [r for r in recs if r["status"] == "cancelled" and r["sent_at_ns"] is None]
    assert ok and never and len(ok) + len([r for r in recs if r["status"] == "cancelled"]) == 60
    assert all("interrupted" in r["error"] for r in never)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["interrupted"] and (run_dir / "summary.json").is_file()


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_master_without_workers_is_a_reported_error(tmp_path, calib_server):
    from loadgen.targets.managed import free_port
    p = _scenario(tmp_path, calib_server.url, {"mode": "server", "rate": 5, "num_requests": 6})
    res = run_locust(load_scenario(p), LocustOptions(
        workers=1, master=True, master_port=free_port(), bind_host="127.0.0.1",
        connect_timeout_s=1.5, scenario_path=str(p)))
    assert "0 of 1 workers connected" in res.meta["crashed"]
    recs = read_records(res.run_dir / "records.jsonl")
    _check_exactly_once(recs, 6)
    assert all(r["status"] == "cancelled" and "never became ready" in r["error"] for r in recs)


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_locust_run_scrapes_metrics_and_records_the_server_version(tmp_path):
    """--engine locust writes what the native engine writes: server_metrics.jsonl (scraped by
    the same worker process, marks around the measured window) and sut.json with the server's
    GET /version; a server without /metrics is said unavailable in meta.json, not silently."""
    from analysis.server.metrics import server_metrics_summary
    from analysis.server.series import read_rows
    from servers.vllm.metrics_fake import VERSION, FakeVllmMetrics
    with FakeVllmMetrics(calibration=True) as srv:
        p = _scenario(tmp_path, srv.url, {"mode": "concurrency", "concurrency": 2,
                                          "num_requests": 6, "warmup_requests": 1},
                      target={"url": srv.url, "metrics_interval_s": 0.2})
        res = _run(p, workers=2)
    d = res.run_dir
    sut = json.loads((d / "sut.json").read_text())
    assert sut["server_version"] == {"version": VERSION, "source": "GET /version"}
    meta = json.loads((d / "meta.json").read_text())
    assert meta["crashed"] is None and meta["t0_ns"] is not None, meta["crashed"]
    sm = meta["server_metrics"]
    assert sm["status"] == "measured" and sm["isolation"] == "process" and sm["rows"] > 0
    rows = read_rows(d / "server_metrics.jsonl")
    marks = [r for r in rows if r["name"] == "loadgen:mark"]
    assert [m["labels"]["mark"] for m in marks] == ["measure_start", "measure_end"]
    assert marks[0]["t_ns"] <= meta["t0_ns"] and marks[1]["t_ns"] >= meta["end_ns"]
    assert "vllm:num_requests_running" in {r["name"] for r in rows}
    assert server_metrics_summary(d)["status"] == "measured"
    assert res.summary["server_metrics"]["status"] == "measured"
    # the calibration server has no /metrics: unavailable, with the reason, in meta.json
    with CalibrationServer() as plain:
        p = _scenario(tmp_path, plain.url, {"mode": "concurrency", "concurrency": 1,
                                            "num_requests": 2}, name="plain")
        res = _run(p)
    sm = json.loads((res.run_dir / "meta.json").read_text())["server_metrics"]
    assert sm["status"] == "unavailable" and "HTTP 404" in sm["reason"]
    assert res.summary["server_metrics"]["status"] == "unmeasured"


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_locust_workers_drop_the_fields_the_probe_found_rejected(tmp_path):
    from tests.loadgen.client.fakes import FakeOpenAI
    with FakeOpenAI(reject=("ignore_eos",), models=("calib-model",)) as srv:
        path = _scenario(tmp_path, srv.url, {"mode": "concurrency", "concurrency": 2,
                                             "num_requests": 4})
        res = _run(path)
        bodies = list(srv.bodies)
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    assert [r["status"] for r in recs] == ["ok"] * 4
    assert res.meta["probe"]["dropped_fields"] == ["ignore_eos"]
    assert "ignore_eos" in bodies[0]                       # the refused probe
    assert all("ignore_eos" not in b for b in bodies[1:])  # the accepted probe and every worker's


PLAN_DROP_SCRIPT = r'''
import sys
from gevent import monkey; monkey.patch_all()
import gevent
from loadgen.engine.locust import coordinator as C
from loadgen.scenario.loader import load_scenario

C.RESEND_NS = 100_000_000                  # 0.1 s: the test need not wait 2 s


class Runner:                              # a hand-written Locust master: two connected workers,
    def __init__(self, co_ref):            # worker 1 registers its handlers late (drops plan 1)
        self.co_ref, self.sent = co_ref, []

    def send_message(self, t, data, client_id=None):
        self.sent.append(t)
        if t == "loadgen_plan":
            plans = self.sent.count("loadgen_plan")
            co = self.co_ref[0]
            gevent.spawn(co.on_message, "loadgen_ready", 0, {"index": 0})
            if plans >= 2:                 # worker 1 only hears the re-sent plan
                gevent.spawn(co.on_message, "loadgen_ready", 1, {"index": 1})


class Env:
    pass


ref = []
env = Env()
env.runner = Runner(ref)
co = C.Coordinator(env, load_scenario(sys.argv[1]), 2, {"base_url": "http://127.0.0.1:9"},
                   sys.argv[2])
co.alive = lambda i: True
ref.append(co)
co.broadcast("loadgen_plan", dict(co.setup))
co._wait("loadgen_ready", [0, 1], 5.0, resend=lambda: co.broadcast("loadgen_plan", dict(co.setup)))
print("plans", env.runner.sent.count("loadgen_plan"), "ready", sorted(co.got["loadgen_ready"]))
'''


def test_a_plan_a_worker_dropped_is_sent_again_until_it_is_ready(tmp_path):
    """A Locust worker counts as connected before its loadgen handlers exist: a plan sent in
    between is dropped ("Unknown message type received: loadgen_plan", seen in CI). The master
    sends the plan again until every worker answered ready (a gevent subprocess, fake runner)."""
    p = _scenario(tmp_path, "http://127.0.0.1:9", {"mode": "concurrency", "concurrency": 2,
                                                   "num_requests": 4})
    out = subprocess.run([sys.executable, "-c", PLAN_DROP_SCRIPT, str(p), str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    plans, ready = out.stdout.split("ready")
    assert int(plans.split()[1]) >= 2 and ready.strip() == "[0, 1]"
