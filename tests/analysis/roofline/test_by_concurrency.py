"""analysis/roofline/by_concurrency.py: each inter-token gap at the requests in flight over it."""
import numpy as np
import pytest

from analysis.metrics import figures as m
from analysis.roofline import by_concurrency as bc
from analysis.roofline import devices, model_cost
from analysis.roofline.run_roofline import roofline_summary
from tests.analysis.synth import TINY_SHAPE, rec


def _device(bandwidth=1e10, peak=1e12):
    spec = devices.DeviceSpec("test-device", "1 chip",
                              peak={"fp32": devices.Figure(peak, "FLOP/s", "documented", "t")},
                              mem_bandwidth=devices.Figure(bandwidth, "B/s", "documented", "t"))
    return {"source": "frozen", "how": "test", "spec": spec}


def _timeline():
    """A: sent 0, a token every 10 ms from 10 to 70, ends 75 (prompt 10).
    B: sent 25, tokens at 35 and 45, ends 50 exactly (prompt 20).
    C: an error, sent 62, ended 64, no tokens (still in flight: load is load)."""
    a = rec(0, sent=0, chunks=[[t, 1] for t in range(10, 80, 10)], end=75, prompt=10)
    b = rec(1, sent=25, chunks=[[35, 1], [45, 1]], end=50, prompt=20)
    c = rec(2, sent=62, chunks=[], end=64, status="error", error_kind="http", prompt=10)
    return [a, b, c]


def test_level_attribution_on_a_hand_built_timeline():
    recs = _timeline()
    g = bc.gaps(recs)
    starts, ends = bc.spans(recs)
    levels = bc.level_of(starts, ends, [x[0] for x in g], [x[1] for x in g]).tolist()
    ms = lambda x: (x[0] // 1_000_000, x[1] // 1_000_000)  # noqa: E731
    got = {ms(x): k for x, k in zip(g, levels)}
    assert got == {(10, 20): 1,      # A alone
                   (20, 30): -1,     # B starts at 25: straddles
                   (30, 40): 2, (40, 50): 2,   # B in flight up to and at its end instant 50
                   (50, 60): -1,     # B ended at 50, inside [50, 60)
                   (60, 70): -1,     # C started at 62
                   (35, 45): 2}      # B's own gap, A in flight
    out = bc.by_in_flight(recs, TINY_SHAPE, _device()["spec"])
    assert out["by_in_flight_dropped"] == 3
    rows = {r["in_flight"]: r for r in out["by_in_flight"]}
    assert set(rows) == {1, 2} and (rows[1]["gaps"], rows[2]["gaps"]) == (1, 3)
    # context = prompt + tokens received before the gap's closing chunk
    assert rows[1]["context_len"] == 11
    assert rows[2]["context_len"] == pytest.approx((13 + 14 + 21) / 3)
    assert rows[1]["itl_p50_ms"] == 10.0 and rows[2]["itl_p50_ms"] == 10.0


def test_warmup_gaps_are_not_measured_but_warmup_requests_are_load():
    w = rec(0, phase="warmup", sent=0, chunks=[[t, 1] for t in range(10, 300, 10)], end=300)
    x = rec(1, sent=5, chunks=[[t, 1] for t in range(15, 250, 10)], end=255)
    out = bc.by_in_flight([w, x], TINY_SHAPE, _device()["spec"])
    assert [r["in_flight"] for r in out["by_in_flight"]] == [2]
    assert out["by_in_flight"][0]["gaps"] == 23
    assert out["batch1"]["reason"] == bc.NO_BATCH1 and out["batch1"]["mbu"] is None


def _sequential(n_req=3, tokens=11, itl=10.0, prompt=10, per_chunk=1):
    """n_req requests one after another (never two in flight), one chunk every itl ms."""
    out, t = [], 0.0
    for i in range(n_req):
        ch = [[t + 20 + k * itl, per_chunk] for k in range(tokens)]
        out.append(rec(i, sched=t, sent=t, chunks=ch, end=ch[-1][0] + 1, prompt=prompt))
        t = ch[-1][0] + 5
    return out


def test_batch1_mbu_is_step_bytes_over_itl_p50_and_bandwidth():
    recs = _sequential()                       # 3 x 10 gaps of 10 ms, all at level 1
    out = bc.by_in_flight(recs, TINY_SHAPE, _device(bandwidth=1e10)["spec"])
    one = out["by_in_flight"][0]
    assert (one["in_flight"], one["batch"], one["gaps"]) == (1, 1, 30)
    assert out["by_in_flight_dropped"] == 0
    assert one["context_len"] == pytest.approx(15.5)          # 10 + 1..10
    step = model_cost.decode_step_bytes(TINY_SHAPE, 1, 16)    # round(15.5) = 16
    assert one["step_bytes"] == step
    assert one["floor_ms"] == pytest.approx(step / 1e10 * 1e3)
    b1 = out["batch1"]
    assert b1["mbu"] == pytest.approx(step / 0.010 / 1e10) and b1["reason"] is None
    assert (b1["gaps"], b1["itl_p50_ms"], b1["floor_ms"]) == (30, 10.0, one["floor_ms"])


def test_itl_is_the_metrics_token_weighted_definition():
    # 3 tokens per chunk, chunks 30 ms apart: 10 ms per token, as analysis.metrics.itl_ms says
    recs = _sequential(n_req=1, tokens=25, itl=30.0, per_chunk=3)
    recs[0]["chunks"][5][0] += 6_000_000            # one slow chunk: 36 ms for 3 tokens
    out = bc.by_in_flight(recs, TINY_SHAPE, _device()["spec"])
    want = float(np.median(m.itl_ms(recs[0])))
    assert out["batch1"]["itl_p50_ms"] == pytest.approx(want) == pytest.approx(10.0)
    assert out["by_in_flight"][0]["tokens"] == 72 and out["batch1"]["gaps"] == 24


def test_too_few_gaps_is_none_with_the_reason():
    out = bc.by_in_flight(_sequential(n_req=1, tokens=10), TINY_SHAPE, _device()["spec"])
    b1 = out["batch1"]
    assert b1["gaps"] == 9 and b1["itl_p50_ms"] == 10.0 and b1["floor_ms"] is not None
    assert b1["mbu"] is None
    assert b1["reason"] == f"only 9 gap(s) at this level (an MBU needs {bc.MIN_GAPS})"
    assert bc.MIN_GAPS == 20
    # with MIN_GAPS of them, the MBU is there
    out = bc.by_in_flight(_sequential(n_req=1, tokens=bc.MIN_GAPS + 1), TINY_SHAPE,
                          _device()["spec"])
    assert out["batch1"]["gaps"] == bc.MIN_GAPS and out["batch1"]["mbu"] is not None


def test_no_gaps_at_all_says_so():
    out = bc.by_in_flight([rec(0, sent=0, chunks=[[10, 5]], end=11)], TINY_SHAPE,
                          _device()["spec"])
    assert out["by_in_flight"] == [] and out["batch1"]["mbu"] is None
    assert out["batch1"]["reason"].startswith("no inter-token gap")


def test_a_broken_floor_is_no_mbu_above_1_and_is_listed():
    recs = _sequential()
    dev = _device(bandwidth=1e6)             # floor ~ 400 ms against a 10 ms ITL
    out = bc.by_in_flight(recs, TINY_SHAPE, dev["spec"])
    one = out["by_in_flight"][0]
    assert one["broken"] and one["mbu"] is None and one["achieved_bandwidth"] is None
    assert one["floor_over_measured"] > 1 and one["reason"].endswith(bc.BROKEN)
    assert out["batch1"]["mbu"] is None and out["batch1"]["reason"] == one["reason"]
    r = roofline_summary(recs, TINY_SHAPE, dev)
    figs = {b["figure"]: b for b in r["broken_floors"]}
    assert figs["ITL p50 at 1 in flight"]["measured_ms"] == 10.0
    assert r["batch1"] == out["batch1"] and r["by_in_flight"] == out["by_in_flight"]


def test_the_floor_batch_is_capped_at_the_server_slots():
    # three requests sent together, each 25 gaps of 10 ms: level 3, decoded 2 at a time
    recs = [rec(i, sent=0, chunks=[[20 + k * 10, 1] for k in range(26)], end=300) for i in range(3)]
    out = bc.by_in_flight(recs, TINY_SHAPE, _device()["spec"], slots=2)
    (row,) = out["by_in_flight"]
    assert (row["in_flight"], row["batch"], row["gaps"]) == (3, 2, 75)
    ctx = round(row["context_len"])
    assert row["step_bytes"] == model_cost.decode_step_bytes(TINY_SHAPE, 2, ctx)
    assert out["batch1"]["reason"] == bc.NO_BATCH1
