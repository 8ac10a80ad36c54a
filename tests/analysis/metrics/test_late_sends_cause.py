"""Late sends blamed on their known cause, not on "the host" (issue 41 item 13, issue 38):
``load.max_concurrency: 1`` under ``rate: 50`` makes every send wait for a free slot — the
in-flight cap, said so; and the managed server under test (target.server) is counted apart from
other processes, so the server a run manages never makes the host "busy". Pure functions fed
hand-built records and /proc samples: no clock."""
from analysis.metrics import late_sends, saturation, summary
from analysis.roofline import host_load
from tests.analysis.synth import rec, server_meta, steady

# a 2-CPU box at idle but for the managed server (1.1 CPUs) and the client (0.05)
QUIET_BUT_SERVER = {"loadavg_1m": 1.2, "ncpu": 2, "other_cpus": 0.0, "server_cpus": 1.1,
                    "steal_fraction": 0.0, "seconds": 2.0, "busy": False, "reasons": []}


def capped(n: int = 40, gap_ms: float = 20, took_ms: float = 60) -> list:
    """rate 50 (every 20 ms) with one slot: each request is sent when the one before ends."""
    out, free = [], 0.0
    for i in range(n):
        s = i * gap_ms
        t = max(s, free)
        end = t + took_ms
        out.append(rec(i, sched=s, sent=t, chunks=[[t + 5, 0], [t + 20, 1], [end, 1]]))
        free = end
    return out


def test_late_sends_under_a_cap_of_one_name_the_cap():
    recs = capped()
    c = late_sends.held_by_cap(recs, {"in_flight_cap": 1}, 10.0)
    assert c["cap"] == 1 and c["late"] >= 30 and c["held"] == c["late"] and c["explains"]
    # even on a host that looks busy, the cap is the known cause
    busy = {**QUIET_BUT_SERVER, "other_cpus": 1.7, "busy": True,
            "reasons": ["other processes used 1.7 of 2 CPUs"]}
    s = summary.summarize(recs, server_meta(client_cpu=0.02, in_flight_cap=1, host_load=busy))
    cl = s["client"]
    assert cl["saturated"] is False and cl["reasons"] == []
    assert cl["host"]["explains"] == []                       # not the host's doing
    w = [x for x in cl["warnings"] if x.startswith("schedule lag p99")]
    assert len(w) == 1 and "waited for a free slot under the in-flight cap" in w[0]
    lag = [r for r in s["verdict"]["reasons"] if r.startswith("p99 schedule lag")]
    assert len(lag) == 1 and "in-flight cap" in lag[0] and "host was busy" not in lag[0]


def test_late_sends_with_free_slots_are_not_the_caps():
    recs = steady(40, lag_ms=13.1)       # one at a time, never two in flight: the cap never full
    c = late_sends.held_by_cap(recs, {"in_flight_cap": 8}, 10.0)
    assert c["held"] == 0 and not c["explains"]
    assert late_sends.held_by_cap(recs, {"in_flight_cap": None}, 10.0) is None
    assert "in-flight cap" not in saturation.lag_cause(server_meta(in_flight_cap=8), recs, 10.0)


def test_the_managed_server_is_counted_apart_from_other_processes():
    # /proc/stat samples: 2 CPUs over 1 s (200 jiffies), 120 busy; this process 0.05 s, the
    # managed server 1.1 s of CPU: others 1.2 − 0.05 − 1.1 = 0.05
    a = {"t": 0.0, "stat": (1000, 900, 0), "own_cpu_s": 1.0, "loadavg": (1.2, 1, 1), "ncpu": 2,
         "server_cpu_s": 5.0}
    b = {"t": 1.0, "stat": (1200, 980, 0), "own_cpu_s": 1.05, "loadavg": (1.2, 1, 1), "ncpu": 2,
         "server_cpu_s": 6.1}
    load = host_load.between(a, b)
    assert load["server_cpus"] == 1.1 and load["other_cpus"] == 0.05
    assert host_load.assess(load, {})["busy"] is False
    # without the server's reading the same samples blame "other processes": the old report
    a0, b0 = dict(a, server_cpu_s=None), dict(b, server_cpu_s=None)
    old = host_load.between(a0, b0)
    assert old["other_cpus"] == 1.15 and host_load.assess(old, {})["busy"] is True


def test_a_run_on_an_idle_box_with_its_managed_server_is_not_host_busy():
    s = summary.summarize(steady(40), server_meta(client_cpu=0.02, host_load=QUIET_BUT_SERVER))
    assert not any("host busy" in w for w in s["client"]["warnings"])
    assert s["client"]["host"]["busy"] is False
    # late sends there: the evidence says what was seen, server apart
    s = summary.summarize(steady(40, lag_ms=13.1),
                          server_meta(client_cpu=0.02, host_load=QUIET_BUT_SERVER))
    why = " ".join(s["client"]["warnings"])
    assert "the managed server used 1.1 CPUs, other processes 0.0 of 2 CPUs" in why
    assert "host busy" not in why


def test_tree_cpu_s_reads_a_real_process_and_none_for_no_process():
    import os
    assert host_load.tree_cpu_s(os.getpid()) > 0
    assert host_load.tree_cpu_s(None) is None
    assert host_load.tree_cpu_s(2 ** 22 + 12345) is None      # above pid_max: no such process

