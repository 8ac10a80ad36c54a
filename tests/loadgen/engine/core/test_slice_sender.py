"""loadgen.engine.core.sender: the sans-I/O sender (pure; its time is the caller's ``now``)."""
from loadgen.engine.core.plan import Plan
from loadgen.engine.core.sender import SliceSender, drain_why
from loadgen.scenario.loader import scenario_from_dict

S = 1_000_000_000


def _sc(tmp_path, load):
    return scenario_from_dict({
        "name": "t", "target": {"url": "http://127.0.0.1:1"},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 4}},
        "load": load, "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}})


def test_server_slice_is_due_at_t0_plus_its_offset_and_then_used_up(tmp_path):
    sc = _sc(tmp_path, {"mode": "server", "rate": 10, "num_requests": 7, "warmup_requests": 3})
    s = SliceSender(Plan(sc, 1, 2), sc.load)
    assert s.next(5) is None                              # idle: no phase yet
    s.phase = "warm"
    warm = [s.next(5)]
    assert [(w.id, w.phase, due) for w, due in warm] == [(1, "warmup", 5)]
    assert s.next(6) is None and s.warm_done
    s.phase = "measured"
    s.begin(100 * S)
    offs = {x.id: x.offset_ns for x in Plan(sc).measured_specs()}
    got = []
    while (n := s.next(0)) is not None:
        got.append(n)
    assert [(x.id, due) for x, due in got] == [(i, 100 * S + offs[i]) for i in (4, 6, 8)]
    assert s.exhausted and s.settled
    rec = s.record(got[0][0], got[0][1])
    assert (rec.id, rec.scheduled_at_ns, rec.requested_output_tokens) == (4, 100 * S + offs[4], 4)


def test_closed_loop_waits_for_t0_ends_at_its_duration_and_drains(tmp_path):
    sc = _sc(tmp_path, {"mode": "concurrency", "concurrency": 2, "duration_s": 1,
                        "drain_timeout_s": 2})
    s = SliceSender(Plan(sc), sc.load)
    s.phase = "measured"
    s.begin(10 * S)
    assert s.end_ns == 11 * S and s.next(9 * S) is None   # before t0: nothing yet
    spec, due = s.next(10 * S)
    assert due == 10 * S and spec.offset_ns is None
    rec = s.record(spec, due)
    s.taken(rec)
    s.last_issue_ns = due
    assert s.next(11 * S) is None and s.exhausted and not s.settled
    assert s.drain_due(13 * S) is None                    # 2 s after the end: not yet over
    assert s.drain_due(13 * S + 1) == drain_why(2) == (
        "not finished 2 s after the last send (load.drain_timeout_s)")
    s.ended(rec)
    assert s.drain_due(20 * S) is None and s.settled


def test_stages_gate_each_user_by_the_stage_running_now(tmp_path):
    sc = _sc(tmp_path, {"mode": "concurrency", "duration_s": 2, "stages": [
        {"concurrency": 1, "duration_s": 1}, {"concurrency": 3, "duration_s": 1}]})
    s = SliceSender(Plan(sc), sc.load)
    s.phase = "measured"
    s.begin(0)
    assert s.end_ns == 2 * S
    assert s.gate(0, 5) == ("send", 5)
    assert s.gate(2, 5) == ("wait", 1 * S)                # the second stage needs user 2
    assert s.gate(3, 5) == ("idle", 2 * S)                # no stage ever needs user 3
