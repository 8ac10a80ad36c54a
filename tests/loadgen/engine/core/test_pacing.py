"""loadgen.engine.core.pacing: the one scheduler's strategies, fed a fake clock (no I/O, no sleep)."""
import numpy as np

from loadgen.engine.core.pacing import (T0_LEAD_NS, Closed, Offline, OpenLoop, Sessions, Staged,
                                        drain_why, pacing_for, slice_pacing)
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.schedule import build_schedule, seed_for

S = 1_000_000_000


def _sc(tmp_path, load, workload=None):
    return scenario_from_dict({
        "name": "t", "target": {"url": "http://127.0.0.1:1"}, "api": {"endpoint": "chat"},
        "workload": workload or {"tokenizer": "bytes",
                                 "prompt_tokens": {"dist": "fixed", "value": 8},
                                 "output_tokens": {"dist": "fixed", "value": 4}},
        "load": load, "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}})


def _pacing(sc, **kw):
    return pacing_for(sc.load, build_schedule(sc.load, seed_for(sc)), **kw)


def test_the_factory_is_the_one_mode_switch(tmp_path):
    cases = [({"mode": "offline", "num_requests": 4}, Offline, True, 0),
             ({"mode": "server", "rate": 5, "num_requests": 4}, OpenLoop, True, T0_LEAD_NS),
             ({"mode": "concurrency", "concurrency": 3, "num_requests": 9}, Closed, False, 0),
             ({"mode": "concurrency", "duration_s": 1,
               "stages": [{"concurrency": 2, "duration_s": 1}]}, Staged,
              False, 0)]
    for load, cls, planned, lead in cases:
        p = _pacing(_sc(tmp_path, load))
        assert type(p) is cls and p.planned is planned and p.t0_lead_ns == lead
        assert not p.sessions


def test_open_loop_due_times_are_t0_plus_the_schedule_whatever_the_clock(tmp_path):
    sc = _sc(tmp_path, {"mode": "server", "rate": 10, "num_requests": 5, "seed": 3})
    sched = build_schedule(sc.load, seed_for(sc))
    p = pacing_for(sc.load, sched).begin(7 * S)
    assert [p.due(i) for i in range(5)] == [7 * S + int(o) for o in sched.offsets_ns]
    off = _pacing(_sc(tmp_path, {"mode": "offline", "num_requests": 3})).begin(2 * S)
    assert [off.due(i) for i in range(3)] == [2 * S] * 3


def test_planned_drain_is_due_drain_timeout_after_the_last_send(tmp_path):
    p = _pacing(_sc(tmp_path, {"mode": "offline", "num_requests": 3,
                               "drain_timeout_s": 2})).begin(0)
    assert p.drain_due(5 * S, 4 * S) is None
    assert p.drain_left_s(5 * S, 4 * S) == 1.0
    assert p.drain_due(6 * S, 4 * S) == drain_why(2)
    assert p.unsent() is None


def test_closed_loop_refills_until_the_budget_and_counts_the_rest(tmp_path):
    p = _pacing(_sc(tmp_path, {"mode": "concurrency", "concurrency": 2,
                               "num_requests": 3})).begin(10 * S)
    assert p.users == 2
    assert p.when(0, 9 * S) == 10 * S                    # before t0: wait for it
    sent = []
    for now in (10 * S, 10 * S + 1, 10 * S + 2, 10 * S + 3):    # a user frees, asks again
        t = p.when(len(sent) % 2, now)
        if t is None:
            break
        p.took()
        sent.append(t)
    assert sent == [10 * S, 10 * S + 1, 10 * S + 2] and p.when(1, 99 * S) is None
    assert p.unsent() == 0 and p.drain_due(10**15, None) is None   # no duration: no drain
    q = _pacing(_sc(tmp_path, {"mode": "concurrency", "concurrency": 1,
                               "num_requests": 5})).begin(0)
    q.took()
    assert q.unsent() == 4                              # stopped after one: 4 never started


def test_closed_loop_duration_ends_sending_then_drains_after_it(tmp_path):
    p = _pacing(_sc(tmp_path, {"mode": "concurrency", "concurrency": 1, "duration_s": 1,
                               "drain_timeout_s": 2})).begin(10 * S)
    assert p.end_ns == 11 * S
    assert p.when(0, 11 * S - 1) == 11 * S - 1 and p.when(0, 11 * S) is None
    assert p.drain_due(13 * S, 11 * S) is None
    assert p.drain_due(13 * S + 1, 11 * S) == drain_why(2, "load.duration_s")
    assert p.unsent() is None                           # a duration: no count of the rest


def test_stages_gate_users_by_the_stage_running_now(tmp_path):
    sc = _sc(tmp_path, {"mode": "concurrency", "num_requests": 100, "drain_timeout_s": 1,
                        "stages": [{"concurrency": 1, "duration_s": 1},
                                   {"concurrency": 3, "duration_s": 1}]})
    p = _pacing(sc).begin(0)
    assert p.users == 3 and p.end_ns == 2 * S
    assert p.when(0, 5) == 5                            # stage 1 needs user 0
    assert p.when(2, 5) == 1 * S                        # user 2 waits for stage 2
    assert p.when(2, 1 * S) == 1 * S and p.when(0, 2 * S) is None
    assert p.drain_due(3 * S + 1, None) == drain_why(1, "the last stage")
    assert p.unsent() is None


def test_a_slice_gets_its_share_of_users_budget_stages_and_times(tmp_path):
    sc = _sc(tmp_path, {"mode": "concurrency", "concurrency": 5, "num_requests": 7})
    p = slice_pacing(sc.load, build_schedule(sc.load, seed_for(sc)), 1, 2).begin(0)
    assert (type(p), p.users, p.num) == (Closed, 2, 3)
    st = _sc(tmp_path, {"mode": "concurrency", "duration_s": 1,
                        "stages": [{"concurrency": 3, "duration_s": 1}]})
    q = slice_pacing(st.load, build_schedule(st.load, seed_for(st)), 1, 2).begin(0)
    assert type(q) is Staged and q.users == 1 and q.when(1, 0) is None   # its one user of 3
    sv = _sc(tmp_path, {"mode": "server", "rate": 10, "num_requests": 6})
    sched = build_schedule(sv.load, seed_for(sv))
    r = slice_pacing(sv.load, sched, 1, 2).begin(0)
    assert [r.due(i) for i in range(3)] == [int(o) for o in sched.offsets_ns[1::2]]


def test_sessions_open_at_the_schedule_or_by_users(tmp_path):
    wl = {"source": "sessions", "tokenizer": "bytes"}
    sc = _sc(tmp_path, {"mode": "server", "rate": 2, "num_requests": 4, "duration_s": 3}, wl)
    sched = build_schedule(sc.load, seed_for(sc))
    p = pacing_for(sc.load, sched, sessions=True).begin(S)
    assert type(p) is Sessions and p.sessions and not p.planned
    assert np.array_equal(p.offsets, sched.offsets_ns) and p.t0_lead_ns == T0_LEAD_NS
    assert p.end_ns == 4 * S
    c = _sc(tmp_path, {"mode": "concurrency", "concurrency": 3, "num_requests": 4}, wl)
    q = pacing_for(c.load, build_schedule(c.load, seed_for(c)), sessions=True).begin(0)
    assert q.offsets is None and q.users == 3 and q.t0_lead_ns == 0 and q.end_ns is None
