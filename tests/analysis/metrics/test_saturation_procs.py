"""analysis.metrics.saturation with several sender processes: each process judged on its own
records and load; a reason names its process."""
from analysis.metrics.saturation import saturation

MS = 1_000_000


def rec(i, worker, lag_ms):
    return {"id": i, "phase": "measured", "status": "ok", "worker": worker,
            "scheduled_at_ns": 1000 * MS, "sent_at_ns": int((1000 + lag_ms) * MS),
            "end_at_ns": 2000 * MS, "chunks": [], "coalesced_reads": 0}


def meta(procs):
    return {"mode": "server", "client_cpu": max(p["cpu_util"] for p in procs),
            "client_transport": {"transport": "wire", "stamp_source": "kernel"},
            "client_load": {"loop_lag_ms_p99": 1.0}, "client_processes": procs}


def test_each_process_is_judged_on_its_own():
    procs = [{"index": 0, "cpu_util": 0.5, "loop_lag_ms_p99": 1.0},
             {"index": 1, "cpu_util": 0.95, "loop_lag_ms_p99": 1.0}]
    recs = [rec(i, "0", 50.0) for i in range(10)] + [rec(10 + i, "1", 0.1) for i in range(10)]
    sat = saturation(recs, meta(procs), None)
    assert sat["saturated"]
    got = {(r["rule"], r["process"]) for r in sat["reasons"]}
    assert got == {("schedule_lag_ms_p99", 0), ("cpu_fraction", 1)}
    assert all(w.startswith("client process ") for w in sat["warnings"])
    assert [p["process"] for p in sat["processes"]] == [0, 1]


def test_two_processes_at_half_a_core_each_are_not_saturated():
    procs = [{"index": k, "cpu_util": 0.6, "loop_lag_ms_p99": 1.0} for k in (0, 1)]
    recs = [rec(i, str(i % 2), 0.1) for i in range(20)]
    sat = saturation(recs, meta(procs), None)
    assert not sat["saturated"] and sat["figures"]["cpu_fraction"] == 0.6


def test_one_process_run_unchanged():
    m = {"mode": "server", "client_cpu": 0.95, "client_transport": {"stamp_source": "kernel"}}
    sat = saturation([rec(0, None, 0.1)], m, None)
    assert [r["rule"] for r in sat["reasons"]] == ["cpu_fraction"] and "processes" not in sat
    assert "process" not in sat["reasons"][0]
