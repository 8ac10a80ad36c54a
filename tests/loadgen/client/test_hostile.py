"""The client against hostile servers: every case × both transports, a real `loadgen run` each.

    servers/hostile/server.py (its own process, one case of servers/hostile/cases.py)
        ◄── python -m loadgen run (subprocess; LOADGEN_HTTP=wire | aiohttp; probe off; 8 requests,
            concurrency 4, api.timeout_s 2 (30 where no timeout is expected); key from $HOSTILE_KEY, a random sk-test-…; a random
            secret X-Api-Key in api.headers)      harness: bench/hostile.py (run_case, EXPECT)
    each run: no hang (killed after rounds × timeout + 20 s), no traceback, the expected exit code,
    exactly one record per scheduled request, every record of the expected kind, peak RSS of the
    client process itself (VmHWM, not rusage: that counts this pytest process too) under 500 MB, neither secret in any file of the output directory nor on stdout/stderr.
    Signals: SIGINT while every request parses an endless token stream, SIGTERM while every one
    waits on a server that never answers ─► exit 130 within 15 s, every started request's record
    kept (cancelled), the never-started rest counted in meta.json ``unsent_requests``.

The runs of the first test are made up front by a module fixture, three at a time, each in its
own directory with its own server; each test then checks its own run. The bounds are wall-clock
guards against hangs, generous for a busy 2-core box; nothing asserts a duration beyond them.
"""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.hostile import (ROOT, EXPECT, EXPECT_ON, FREED_AT_ONCE, RSS_LIMIT_MB, TRANSPORTS, find_secrets, kind_of, read_records,
                           reap, run_case, start_run, verdict)
from servers.hostile.server import HostileServer
from servers.port_server import alive

N = 8
PARALLEL = 3
# the default suite drives the default transport for http:// (wire); the aiohttp column (https's
# transport) is in `pytest -m slow` and in `python -m bench.hostile` (bench/results/hostile-*)
SUITE_TRANSPORTS = [t if t == "wire" else pytest.param(t, marks=pytest.mark.slow)
                    for t in TRANSPORTS]            # runs at a time (each: a hostile server and a `loadgen run`)
# the fixture's runs count against the first test: 48 runs that all hang would take 48 × 24 s / 3
pytestmark = pytest.mark.timeout(1200)   # a guard against hangs, not a speed goal (86 runs up front)


def verdict_kinds(o) -> tuple:
    return EXPECT_ON.get((o.case, o.transport), EXPECT[o.case])[0]


def problems_of(o) -> list[str]:
    """EXPECT's checks plus each case's own."""
    bad = verdict(o)
    recs = o.records
    if o.case in ("echo_secret_429", "echo_secret_cut") and any(
            r.get("http_status") != 429 for r in recs):
        bad.append(f"http_status {sorted({r.get('http_status') for r in recs}, key=str)}, not 429")
    if o.case == "redirect_307":
        where = f"127.0.0.1:{o.server_log.get('second_port')}"
        if not all(where in (r.get("error") or "") for r in recs):
            bad.append(f"the error does not carry the Location ({where}): "
                       f"{[r.get('error') for r in recs[:1]]}")
        second = [(q["method"], q["path"]) for q in o.server_log.get("requests", [])
                  if q.get("listener") == "second"]
        if second:
            bad.append(f"the redirect was followed: the other listener got {second}")
    if o.case in FREED_AT_ONCE and recs:      # the decision frees the slot, not api.timeout_s
        sent = [r["sent_at_ns"] for r in recs if r.get("sent_at_ns") is not None]
        if sent and max(sent) - min(sent) >= 30e9:
            bad.append("a slot was held until api.timeout_s after its record was decided")
    if o.case in ("second_response", "after_done_events") and any(
            r.get("chunk_output_tokens") != 8 for r in recs):     # usage alone would hide it
        bad.append(f"chunk_output_tokens {sorted({r.get('chunk_output_tokens') for r in recs}, key=str)}"
                   ", expected 8 each: events after the answer's end were counted")
    if verdict_kinds(o) == ("ok",) and any(r.get("output_tokens") != 8 for r in recs):
        bad.append(f"output_tokens {sorted({r.get('output_tokens') for r in recs}, key=str)}, "
                   "expected 8 each")
    return bad


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory) -> dict:
    """Every (case, transport) this session selected, run up front, ``PARALLEL`` at a time: each
    run is its own pair of processes, mostly waiting, so the file's wall time is not the sum."""
    wanted = [(it.callspec.params["case"], it.callspec.params["transport"])
              for it in request.session.items
              if getattr(it, "originalname", None) == "test_client_survives_the_hostile_server"]
    root = tmp_path_factory.mktemp("hostile")

    def one(case, transport):
        # api.timeout_s 2 where a timeout is an expected outcome (endless streams, silence);
        # elsewhere 30 s, so a box too busy to read 16 MiB in 2 s still meets the cap it expects
        timeout_s = 2.0 if "timeout" in EXPECT[case][0] else 30.0
        try:
            return run_case(case, transport, root / f"{case}-{transport}", n=N, concurrency=4,
                            timeout_s=timeout_s)
        except Exception as e:               # reported by that case's test, not by all of them
            return e

    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {w: pool.submit(one, *w) for w in wanted}
        return {w: f.result() for w, f in futures.items()}


@pytest.mark.parametrize("transport", SUITE_TRANSPORTS)
@pytest.mark.parametrize("case", list(EXPECT))
def test_client_survives_the_hostile_server(case, transport, outcomes):
    o = outcomes[(case, transport)]
    if isinstance(o, Exception):
        raise o
    bad = problems_of(o)
    assert not bad, (f"{case} on {transport}: " + "; ".join(bad)
                     + f"\n--- stderr (tail) ---\n{o.stderr[-2000:]}")


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("transport", SUITE_TRANSPORTS)
@pytest.mark.parametrize("case, sig", [("endless_tokens", signal.SIGINT),
                                       ("never_answers", signal.SIGTERM)])
def test_a_signal_stops_a_run_whose_streams_never_end(case, sig, transport, tmp_path):
    """endless_tokens keeps the client busy parsing (max_tokens 10^6, so no event bound fires
    first); never_answers keeps it waiting. api.timeout_s 60: every request is in flight."""
    key, hdr = "sk-test-signal-0123456789abcdef", "hdr-signal-0123456789abcdef"
    with HostileServer(case, lifetime_s=120) as server:
        proc = start_run(tmp_path, server.url, transport, N, 4, 60.0, key, hdr,
                         extra_set=["workload.output_tokens.value=1000000"])
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and alive(proc.pid):
                if sum(q["method"] == "POST" for q in server.log()["requests"]) >= 4:
                    break                        # every user is on a stream that never ends
                time.sleep(0.1)
            assert alive(proc.pid), "the run ended before the signal"
            time.sleep(0.5)
            proc.send_signal(sig)
            rc, hung, wall, rss = reap(proc, 15.0)
        finally:
            if proc.returncode is None:          # an assertion before the reap: no orphan
                proc.kill()
                proc.wait()
    stderr = (tmp_path / "stderr.txt").read_text(errors="replace")
    stdout = (tmp_path / "stdout.txt").read_text(errors="replace")
    assert not hung, f"{sig.name} did not stop the run within 15 s\n{stderr[-2000:]}"
    assert rc == 130 and "Traceback" not in stderr, (rc, stderr[-2000:])
    recs, torn = read_records(tmp_path / "out" / "run" / "records.jsonl")
    meta = json.loads((tmp_path / "out" / "run" / "meta.json").read_text())
    ids = sorted(r["id"] for r in recs)          # a closed loop: the never-sent rest is a count
    assert len(set(ids)) == len(ids) == N - (meta.get("unsent_requests") or 0) and not torn, \
        (ids, meta.get("unsent_requests"))
    assert all(r["status"] == "cancelled" for r in recs), {kind_of(r) for r in recs}
    assert rss < RSS_LIMIT_MB
    assert not find_secrets([key, hdr], tmp_path / "out", stdout, stderr)


def _report(run_dir) -> "subprocess.CompletedProcess":
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "loadgen", "report", str(run_dir), "--no-plots",
                           "--json"], capture_output=True, text=True, timeout=120,
                          cwd=str(ROOT))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_nan_running_gauge_gives_a_summary_and_a_report(outcomes):
    """Issue #41 item 2, end to end: load.cancel's leak check against a server whose running gauge
    is NaN: exit 0 with summary.json (it was exit 1, no summary, and meta.json kept
    {value: null, leaked: true}); `loadgen report` then reads the run; and a run directory
    whose meta.json is an OLD one ({value: null, leaked: true}) reports too."""
    o = outcomes.get(("running_nan", "wire"))
    if o is None:
        pytest.skip("the running_nan case was not selected")
    assert not isinstance(o, Exception) and o.rc == 0, getattr(o, "stderr", o)
    r = _report(o.run_dir)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    cancel = json.loads(r.stdout)["cancel"]
    assert cancel["leaked"] is None and "NaN" in cancel["leaked_reason"]
    meta_path = Path(o.run_dir) / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["running_after"] = {"metric": "vllm:num_requests_running", "value": None,
                             "waited_s": 10.0, "leaked": True, "reason": "still nan running"}
    meta_path.write_text(json.dumps(meta))
    r = _report(o.run_dir)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert json.loads(r.stdout)["cancel"]["leaked"] is None
