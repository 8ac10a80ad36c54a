"""analysis.metrics.steady: the steady-state window on hand-built records, every figure worked on paper."""
import json

import pytest

from analysis.report import run_report
from analysis.metrics import steady
from analysis.metrics import summary
from tests.analysis.synth import MS, power_rows, rec, server_meta, write_run

CLOSED = {"mode": "concurrency", "in_flight_cap": 2}


def req(i, sent_ms, *, phase="measured", dur_ms=1000, n=10):
    """One request sent at sent_ms, n tokens one by one every dur_ms / n, the last at the end."""
    step = dur_ms / n
    return rec(i, phase=phase, sched=sent_ms, sent=sent_ms,
               chunks=[[sent_ms + k * step, 1] for k in range(1, n + 1)])


def two_lanes():
    """Closed loop, 2 users, 1 s requests of 10 tokens: lane A sends at 0, 1, 2, 3 s; lane B joins
    at 0.5 s (ramp-up) and sends at 0.5, 1.5, 2.5, 3.5 s; the last ends at 4.5 s."""
    return ([req(i, 1000 * i) for i in range(4)]
            + [req(4 + i, 500 + 1000 * i) for i in range(4)])


def test_closed_loop_two_users_ramp_up_and_drain_excluded():
    w = steady.steady_window(two_lanes(), CLOSED)
    assert w["status"] == "ok" and w["reason"] is None and w["level"] == 2
    # start: 2 in flight first at 0.5 s (lane B's first send); end: the last send, 3.5 s
    assert (w["start_ns"], w["end_ns"]) == (500 * MS, 3500 * MS)
    assert w["duration_s"] == pytest.approx(3.0)
    # tokens in (0.5, 3.5] s: lane A 5 + 10 + 10 + 5, lane B 10 + 10 + 10 + 0 = 60
    assert w["output_tokens"] == 60
    assert w["output_throughput"] == pytest.approx(20.0)
    # completions in (0.5, 3.5] s: A at 1, 2, 3 s; B at 1.5, 2.5, 3.5 s
    assert w["request_throughput"] == pytest.approx(2.0)
    assert w["mean_in_flight"] == pytest.approx(2.0)
    assert w["rule"] == steady.CLOSED_RULE and "last measured send" in w["rule"]


def test_tokens_counted_inside_the_window_only():
    w = steady.steady_window(two_lanes(), CLOSED)
    # a token exactly at the start (lane A's at 0.5 s) is out, one exactly at the end (3.5 s) is in
    recs = two_lanes()
    inside = sum(1 for r in recs for t, n in r["chunks"] if 500 * MS < t <= 3500 * MS)
    assert inside == w["output_tokens"] == 60
    assert sum(len(r["chunks"]) for r in recs) == 80


def test_non_streamed_request_counts_its_tokens_at_end():
    # one user, 3 answers of 50 tokens without chunks, 1 s each: window 0 .. 2 s (last send)
    recs = [rec(i, sched=1000 * i, sent=1000 * i, end=1000 * (i + 1), out=50) for i in range(3)]
    w = steady.steady_window(recs, {"mode": "concurrency", "in_flight_cap": 1})
    assert (w["start_ns"], w["end_ns"], w["level"]) == (0, 2000 * MS, 1)
    assert w["output_tokens"] == 100                      # ends at 1 s and 2 s
    assert w["output_throughput"] == pytest.approx(50.0)
    assert w["request_throughput"] == pytest.approx(1.0)


def test_server_mode_first_to_last_measured_send():
    # one arrival every 100 ms for 3 s; 10 tokens every 50 ms, the last 500 ms after the send
    recs = [req(i, 100 * i, dur_ms=500) for i in range(30)]
    w = steady.steady_window(recs, server_meta())
    assert w["status"] == "ok" and w["level"] is None and w["rule"] == steady.OPEN_RULE
    assert (w["start_ns"], w["end_ns"]) == (0, 2900 * MS)
    # requests 0..24 deliver all 10 tokens by 2.9 s; 25..28 deliver 8, 6, 4, 2; 29 none
    assert w["output_tokens"] == 270
    assert w["output_throughput"] == pytest.approx(270 / 2.9)
    assert w["request_throughput"] == pytest.approx(25 / 2.9)  # ends at 0.5 .. 2.9 s
    # in flight 1..5 over the first 500 ms (100 ms each), then 5: (1500 + 2400 * 5) / 2900
    assert w["mean_in_flight"] == pytest.approx(13500 / 2900)


def test_warmup_hands_over_a_full_pipeline():
    # lane A: warm-up 0..1 s, measured at 1, 2, 3 s; lane B: warm-up 0.5..1.5 s, measured at
    # 1.5, 2.5, 3.5 s. At the first measured send (1 s) B's warm-up still runs: 2 in flight.
    recs = [req(0, 0, phase="warmup"), req(1, 500, phase="warmup")]
    recs += [req(2 + i, 1000 + 1000 * i) for i in range(3)]
    recs += [req(5 + i, 1500 + 1000 * i) for i in range(3)]
    w = steady.steady_window(recs, CLOSED)
    assert (w["start_ns"], w["end_ns"], w["level"]) == (1000 * MS, 3500 * MS, 2)
    # tokens in (1, 3.5] s: B's warm-up 5; A 10 + 10 + 5; B 10 + 10 + 0
    assert w["output_tokens"] == 50 and w["output_throughput"] == pytest.approx(20.0)
    # completions in (1, 3.5] s: B's warm-up at 1.5, A at 2, 3, B at 2.5, 3.5
    assert w["request_throughput"] == pytest.approx(2.0)
    # counting measured requests alone, 2 would be in flight only from 1.5 s
    only = steady.steady_window([r for r in recs if r["phase"] == "measured"], CLOSED)
    assert only["start_ns"] == 1500 * MS


def test_too_short_or_too_small_a_share_is_unavailable():
    recs = [req(i, 50 * i, dur_ms=100) for i in range(20)]        # sends 0 .. 0.95 s
    w = steady.steady_window(recs, server_meta())
    assert w["status"] == "unavailable" and "0.950 s < the minimum 1 s" in w["reason"]
    assert all(w[k] is None for k in steady.FIGURES)
    w = steady.steady_window(two_lanes(), CLOSED, min_fraction=0.9)  # 3 s of a 4.5 s run
    assert w["status"] == "unavailable" and "< 90% of the full window (4.500 s)" in w["reason"]
    assert w["output_throughput"] is None


def test_level_never_reached_and_no_cap_and_no_records():
    w = steady.steady_window(two_lanes(), {"mode": "concurrency", "in_flight_cap": 3})
    assert w["status"] == "unavailable" and "never reached the level L = 3" in w["reason"]
    # offline without a cap: all 4 sent at once, the level 4 is reached at the last send
    recs = [req(i, i, dur_ms=2000) for i in range(4)]
    w = steady.steady_window(recs, {"mode": "offline", "in_flight_cap": None})
    assert w["status"] == "unavailable" and "no in-flight cap" in w["reason"]
    w = steady.steady_window([], {"mode": "server"})
    assert w["status"] == "unavailable" and w["reason"]


def test_summary_keeps_full_window_and_energy_uses_steady_window():
    meta = server_meta(mode="concurrency", in_flight_cap=2, rate=None, scheduled_rate=None,
                       power_sources=[{"name": "nvml", "status": "ok", "evidence": "measured"}])
    s = summary.summarize(two_lanes(), meta, power_rows(0, 4500, 100.0))
    # existing keys keep their meaning: the full window, 0 .. 4.5 s, 80 tokens
    assert s["duration_s"] == pytest.approx(4.5)
    assert s["output_throughput"] == pytest.approx(80 / 4.5)
    st = s["steady_state"]
    assert st["status"] == "ok" and st["output_throughput"] == pytest.approx(20.0)
    e = s["energy"]
    assert e["window"]["start_ns"] == 500 * MS and e["window"]["end_ns"] == 3500 * MS
    assert e["window_rule"].startswith("steady-state window: closed loop")
    assert e["output_tokens"] == st["output_tokens"] == 60
    assert e["energy_j"] == pytest.approx(300.0)                   # 100 W x 3 s
    assert e["j_per_output_token"] == pytest.approx(5.0)
    json.dumps(s, allow_nan=False)


def test_energy_falls_back_to_the_full_window_and_says_why():
    recs = [req(i, 50 * i, dur_ms=100) for i in range(20)]        # 0 .. 1.05 s, too short
    meta = server_meta(power_sources=[{"name": "nvml", "status": "ok", "evidence": "measured"}])
    e = summary.summarize(recs, meta, power_rows(0, 2000, 100.0))["energy"]
    assert e["window"]["start_ns"] == 0 and e["window"]["end_ns"] == 1050 * MS
    assert e["window_rule"].startswith("full window: first sent_at")
    assert "steady-state window unavailable: 0.950 s < the minimum 1 s" in e["window_rule"]


def test_report_shows_the_steady_window_and_its_rule(tmp_path):
    meta = server_meta(mode="concurrency", in_flight_cap=2, rate=None, scheduled_rate=None,
                       min_queries=0, power_sources=[{"name": "nvml", "status": "ok",
                                                      "evidence": "measured"}])
    d = write_run(tmp_path / "run", two_lanes(), meta)
    (d / "power.jsonl").write_text("".join(json.dumps(r) + "\n"
                                           for r in power_rows(0, 4500, 100.0)))
    md, page = run_report.write_report(d, with_plots=False)
    text, h = md.read_text(), page.read_text()
    assert "| steady-state output throughput (tokens/s) | 20.00 | measured |" in text
    assert "| steady-state request throughput (req/s) | 2.000 | measured |" in text
    assert "| steady-state window (s) / level / mean in flight | 3.000 / 2 / 2.00 |" in text
    assert f"Steady-state window (ok): {steady.CLOSED_RULE}" in text
    assert "Energy window: steady-state window: closed loop" in text
    assert "steady-state output throughput (tokens/s)</td>" in h
    assert "Steady-state window (ok): closed loop" in h


def test_level_judged_after_every_event_at_an_instant():
    # cap 4, 3 measured requests (L = 3). Warm-up W0..W2 end at 1 s, W3 runs to 5 s. At 1 s the
    # ends pass through 3 in flight before M0's send leaves 2; the level is reached at 2 s (M1).
    recs = [rec(i, phase="warmup", sched=0, sent=0, end=1000, chunks=[[1000, 1]])
            for i in range(3)]
    recs += [rec(3, phase="warmup", sched=0, sent=0, end=5000, chunks=[[5000, 1]])]
    recs += [req(4 + i, 1000 * (i + 1), dur_ms=4000) for i in range(3)]
    w = steady.steady_window(recs, {"mode": "concurrency", "in_flight_cap": 4})
    assert w["level"] == 3 and w["status"] == "ok"
    assert (w["start_ns"], w["end_ns"]) == (2000 * MS, 3000 * MS)


def test_mean_in_flight_a_block_of_steps_at_a_time_is_the_sequential_sum(monkeypatch):
    """steady._mean_in_flight sums the area step by step, a block at a time with the running
    sum carried in: the float of one sequential loop, for every block size."""
    import numpy as np
    rng = np.random.default_rng(3)
    for _ in range(100):
        k = int(rng.integers(1, 40))
        ts = np.sort(rng.integers(0, 1000, k)).astype(np.int64)
        cs = rng.integers(0, 9, k).astype(np.int64)
        start = int(rng.integers(-5, 500))
        end = start + int(rng.integers(1, 600))
        area, prev = 0.0, start                      # the loop the docstring names
        cnt = steady._count_at((ts, cs), start)
        for t, c in zip(ts.tolist(), cs.tolist()):
            if start < t < end:
                area += float(cnt) * float(t - prev)
                prev, cnt = t, c
        area += cnt * (end - prev)
        want = area / (end - start)
        for block in (1, 2, 5, 1 << 20):
            monkeypatch.setattr(steady, "BLOCK", block)
            assert steady._mean_in_flight((ts, cs), start, end) == want
