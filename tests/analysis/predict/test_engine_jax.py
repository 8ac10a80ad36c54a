"""analysis.predict.engine_jax: servers.jax's loop mirrored step by step, and the fit's floor
scale (batch 1 under a floor the probes beat). Pure inputs, no server (fast)."""
import pytest

from analysis.predict import workload as wl
from analysis.predict.engine_jax import JaxEngine, batch_buckets
from analysis.predict.fit import fit_overheads
from analysis.predict.simulate import LoadPoint, simulate
from analysis.predict.step_model import Overheads, StepModel
from servers.jax.presets import get_preset, shape_dict

TINY = shape_dict(get_preset("tiny"), "fp32", 4096, 4)
NO_ROOF = {"peak_flops": None, "bandwidth": None}


def model(o: Overheads, slots: int, spec=NO_ROOF, chunk: int = 16) -> StepModel:
    return StepModel(TINY, spec, o, slots, chunk, JaxEngine(interleave_chunk=chunk))


def run(m: StepModel, pairs, users: int):
    """simulate(), and the simulated requests (summarise() keeps only the figures)."""
    from analysis.predict import simulate as sim
    got = {}
    orig = sim.summarise
    sim.summarise = lambda reqs, **k: got.setdefault("r", reqs) and orig(reqs, **k)
    try:
        r = simulate(m, pairs, LoadPoint("closed", concurrency=users))
    finally:
        sim.summarise = orig
    return r, got["r"]


def test_batch_buckets_are_servers_jax_ones():
    from servers.jax.buckets import buckets
    for slots in (1, 4, 8, 12, 64):
        assert batch_buckets(slots) == buckets(1, slots)


def test_two_users_step_arithmetic_one_wake_a_fused_piece_and_the_bucket_of_the_top_slot():
    """Both sent at 0: the idle engine takes the first alone (a standalone pass: prefill 30 +
    5 per prompt = 35 ms, then its decode step at B=1, 11 ms); the second is admitted while it
    decodes, so it is fused: 16-token pieces in the decode steps (46 ms with the first piece's
    5 ms, then 41 ms at B=1 though nothing decodes: the engine runs slot 0 all the same); it
    then decodes in slot 1, so B = 2 (12 ms a step)."""
    m = model(Overheads(step_ms=10, per_seq_ms=1, prefill_ms=30, prefill_req_ms=5), slots=4)
    r, reqs = run(m, [(32, 3)] * 2, users=2)
    assert [round(q.first * 1e3, 6) for q in reqs] == [35.0, 133.0]
    assert [round(q.end * 1e3, 6) for q in reqs] == [92.0, 157.0]
    assert r["ttft_ms_p50"] == pytest.approx((35 + 133) / 2)
    assert r["tpot_ms_p50"] == pytest.approx(((92 - 35) / 2 + (157 - 133) / 2) / 2)


def test_a_burst_prefills_one_prompt_a_step_while_the_backlog_is_long_then_in_small_pieces():
    """8 prompts of 64 at once on 8 slots (the staircase servers.jax measured: +200 ms four
    times, then +600 ms): the first alone, then 64-token catch-up pieces while 256 or more
    prompt tokens wait (one prompt a step), then 16-token pieces (4 steps a prompt)."""
    m = model(Overheads(step_ms=10, prefill_ms=20), slots=8)
    _, reqs = run(m, [(64, 40)] * 8, users=8)
    ttft = [round(q.first * 1e3, 6) for q in reqs]
    assert ttft == [20.0, 60.0, 90.0, 120.0, 150.0, 270.0, 390.0, 510.0]


def test_queueing_beyond_the_slots_waits_in_ttft_and_decodes_as_at_the_slots():
    """16 users on 8 slots send the engine the same sequence as 8 users with no turnaround: the
    queue takes the wait (TTFT), each step is the same, so TPOT is the 8-slot one."""
    m = model(Overheads(step_ms=10, per_seq_ms=2, prefill_ms=20), slots=8)
    pairs = [(64, 32)] * 16
    at8, _ = run(m, pairs, users=8)
    at16, _ = run(m, pairs, users=16)
    assert at16["tpot_ms_p50"] == pytest.approx(at8["tpot_ms_p50"])
    assert at16["ttft_ms_p50"] > 1.5 * at8["ttft_ms_p50"]


def test_a_step_costs_its_batch_bucket_not_the_streams_in_it():
    """3 streams decoding in slots 0-2 run slots [0, 4): per_seq_ms is paid 4 times."""
    m = model(Overheads(step_ms=10, per_seq_ms=1), slots=8, chunk=0)
    _, reqs = run(m, [(8, 20)] * 3, users=3)
    last = max(q.end for q in reqs)
    # with no interleave every prompt is a standalone pass (0 ms here) and decodes from there
    assert (reqs[0].end - reqs[0].first) * 1e3 == pytest.approx(19 * 14.0, rel=0.1)
    assert last > 0


@pytest.mark.parametrize("users", [(1, 4, 8)])
def test_batch1_is_fitted_under_a_floor_the_probes_beat(users):
    """The device spec's floor (a slow 'calibrated' bandwidth) is above what batch 1 measured:
    forced whole, with overheads >= 0, the fit cannot reach batch 1; with floor_scale fitted in
    [0, 1] it matches every probe, and the fit says the floor was contradicted."""
    spec = {"peak_flops": 1e11, "bandwidth": 2e9}           # batch-1 floor ≈ 2 × the truth's
    base = model(Overheads(), slots=8, spec=spec)
    floor1 = base.floor_s(1, 0) * 1e3
    truth = Overheads(step_ms=2.0, per_seq_ms=3.0, prefill_ms=8.0, prefill_req_ms=4.0,
                      turnaround_ms=2.0, floor_scale=0.4)
    pairs = wl.sample({"prompt_tokens": {"dist": "fixed", "value": 48},
                       "output_tokens": {"dist": "fixed", "value": 12}}, 16)
    probes = [{"point": LoadPoint("closed", concurrency=c), "pairs": pairs,
               "measured": simulate(base.with_overheads(truth), pairs,
                                    LoadPoint("closed", concurrency=c))} for c in users]
    assert probes[0]["measured"]["tpot_ms_p50"] < floor1 + 3.0   # below floor + one sequence
    scaled = fit_overheads(base, probes, scale_floor=True)
    whole = fit_overheads(base, probes)
    b1 = lambda f: next(r for r in f["residuals"]                          # noqa: E731
                        if r["probe"] == 0 and r["figure"] == "tpot_ms_p50")["rel_error"]
    assert abs(b1(scaled)) < 0.01 and scaled["rms_rel_error"] < 0.01
    assert b1(whole) > 0.05                                  # forced above the measurement
    assert scaled["floor"]["contradicted"] and scaled["floor"]["scale"] < 0.9
    assert not whole["floor"]["fitted"] and whole["floor"]["scale"] == 1.0
    assert set(scaled["overheads"]) == {"step_ms", "per_seq_ms", "prefill_ms",
                                        "prefill_req_ms", "turnaround_ms"}


def test_spec_only_keeps_the_whole_floor():
    m = model(Overheads(), slots=8, spec={"peak_flops": 1e11, "bandwidth": 2e9})
    assert Overheads().floor_scale == 1.0
    assert m.step_s(1, 16) == pytest.approx(m.floor_s(1, 16))
