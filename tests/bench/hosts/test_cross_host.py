"""The Locust engine across simulated hosts (bench/hosts): workers in their own network, time
and UTS namespaces, the master and the calibration server in another. Every worker's records
land on the master's timeline within the uncertainty meta.json states; a worker whose network
is cut or whose process is killed mid-run leaves its finished records, its unfinished ones
cancelled naming it, an INVALID run, and a master that ends (bounded here)."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from bench.hosts.cluster import Cluster
from bench.hosts.netns import Hosts
from loadgen.engine.core.plan import Plan
from loadgen.scenario.loader import load_scenario

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

SEC = 1_000_000_000
OFFSETS = [600, 3 * 86400]        # ten minutes and three days ahead of the master's clock


def _prompts(path) -> dict:
    plan = Plan(load_scenario(path))
    n = plan.warmup + (plan.count or 0)
    return {i: p.prompt[:120] for i, p in zip(range(n), iter(plan.workload))}


def test_two_hosts_records_land_on_the_masters_timeline(locust_ok, tmp_path):
    with Hosts(2, OFFSETS, delay_ms=2, jitter_ms=0.5) as h:
        c = Cluster(h, tmp_path)
        c.start_server(ttft_ms=20, itl_ms=5)
        p = c.scenario({"mode": "server", "rate": 10, "num_requests": 30,
                        "arrival": "constant", "warmup_requests": 2})
        c.start(p)
        assert c.wait(180) == 0, c.logs()
        truth = {e["prompt"][:120]: e for e in c.server_log()}   # the master's clock
        meta, st, recs = c.meta(), c.master_state(), c.records()
    clock = meta["locust"]["clock"]
    hosts = {w["index"]: w["host"] for w in meta["locust"]["worker_reports"]}
    assert clock["unplaced"] == [] and len(clock["workers"]) == 2
    for idx, cl in clock["workers"].items():
        # a time namespace keeps the boot id: the shortcut must not have said "same_host"
        assert cl["method"] == "ping_pong" and cl["placed"], cl
        off = OFFSETS[int(hosts[int(idx)].rsplit("-w", 1)[1])]      # this host's true offset
        assert abs(cl["shift_ns"] + off * SEC) <= cl["uncertainty_ns"], (idx, cl)
    prompts = _prompts(p)
    assert len(recs) == 32 and {r["worker"] for r in recs} == {"0", "1"}
    for r in recs:
        assert r["status"] == "ok", r["error"]
        u = clock["workers"][r["worker"]]["uncertainty_ns"]
        arrival = truth[prompts[r["id"]]]["arrival_ns"]
        # sent before the server (on the master's clock) had it; its first chunk after
        assert r["sent_at_ns"] <= arrival + u, r["id"]
        assert arrival <= r["first_chunk_at_ns"] + u, r["id"]
        if r["phase"] == "measured":           # within the run's window as the master saw it
            assert st["t0_ns"] - u <= r["scheduled_at_ns"] <= r["sent_at_ns"] <= \
                st["end_ns"] + u, r["id"]
    # the server's arrival order and the records' send order agree wherever the stated
    # uncertainty cannot swap them
    got = sorted(recs, key=lambda r: r["sent_at_ns"])
    for a, b in zip(got, got[1:]):
        ua = clock["workers"][a["worker"]]["uncertainty_ns"]
        ub = clock["workers"][b["worker"]]["uncertainty_ns"]
        if b["sent_at_ns"] - a["sent_at_ns"] > ua + ub + 50_000_000:
            assert (truth[prompts[a["id"]]]["arrival_ns"]
                    < truth[prompts[b["id"]]]["arrival_ns"]), (a["id"], b["id"])


def _poll(cond, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _has_ok(path) -> bool:
    try:
        return any(json.loads(ln).get("status") == "ok" for ln in open(path) if ln.strip())
    except (OSError, ValueError):
        return False


@pytest.mark.slow
def test_a_cut_network_and_a_killed_worker_across_hosts(locust_ok, tmp_path):
    """Worker host 1's veth goes down and worker host 2's process is SIGKILLed once each has
    forwarded an ok record; host 0 runs on. The master ends (Locust's heartbeat liveness marks
    both missing), their forwarded records are kept, the rest cancelled naming the worker,
    INVALID with the reason."""
    with Hosts(3, [60, 3600, 86400]) as h:
        c = Cluster(h, tmp_path)
        c.start_server(ttft_ms=20, itl_ms=5)
        p = c.scenario({"mode": "server", "rate": 10, "num_requests": 150,
                        "arrival": "constant", "drain_timeout_s": 10})
        c.start(p)
        cut, killed = c.locust_worker(1), c.locust_worker(2)
        assert cut and killed, c.logs()
        ldir = c.run_dir / "locust"
        for w in (cut, killed):                   # forwarded to the master, so kept
            assert _poll(lambda: _has_ok(ldir / f"records.worker-{w['index']}.jsonl"), 120), \
                c.logs()
        h.set_link(1, up=False)
        os.kill(killed["pid"], signal.SIGKILL)
        t = time.monotonic()
        rc = c.wait(240)                          # never hangs: bounded here
        assert rc is not None, f"master still running after 240 s\n{c.logs()}"
        ended_s = time.monotonic() - t
        meta, recs = c.meta(), c.records()
    status = meta["locust"]["worker_status"]
    assert status[str(cut["index"])] == "dead" and status[str(killed["index"])] == "dead"
    assert sorted(r["id"] for r in recs) == list(range(150))        # one record per id
    for w in (cut, killed):
        mine = [r for r in recs if r["worker"] == str(w["index"])]
        assert any(r["status"] == "ok" for r in mine), "its forwarded records are kept"
        gone = [r for r in mine if r["status"] == "cancelled"]
        assert gone and all(f"worker {w['index']} died" in r["error"] for r in gone)
    live = [r for r in recs if r["worker"] not in (str(cut["index"]), str(killed["index"]))]
    assert live and all(r["status"] == "ok" for r in live)
    summary = json.loads((c.run_dir / "summary.json").read_text())
    v = summary["verdict"]
    assert not v["valid"] and any("cancelled" in x for x in v["reasons"]), v["reasons"]
    lost = sorted(str(w["index"]) for w in (cut, killed))
    assert any(f"worker {lost[0]} dead" in x and f"worker {lost[1]} dead" in x
               for x in v["reasons"]), v["reasons"]
    assert summary["requests_cancelled"] == meta["locust"]["merge"]["cancelled_for_dead_workers"]
    assert ended_s < 240
