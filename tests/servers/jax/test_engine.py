"""Engine + orchestrator on the tiny preset (fp32): cached batched greedy == the no-cache reference,
sampling reproducibility, finish reasons, slot freeing, cancel, queue limits."""
from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from servers.jax import model as M
from servers.jax.engine import Engine
from servers.jax.orchestrator import Orchestrator
from servers.jax.requests import GenRequest, QueueFull, RequestTooLong, SamplingParams
from servers.jax.presets import get_preset

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

MAX_LEN = 64
SLOTS = 4
ARGS = get_preset("tiny")
PARAMS = M.init_params(ARGS, "fp32", seed=3, std=0.2)      # std 0.2: varied greedy text


@pytest.fixture(scope="module")
def engine() -> Engine:
    e = Engine(ARGS, PARAMS, dtype="fp32", slots=SLOTS, max_model_len=MAX_LEN, eos_ids=set(),
               prefill_chunk=16, interleave_chunk=16)   # prompts > 16 tokens: prefilled in chunks
    e.warmup()
    return e


_ref = jax.jit(lambda p, t: M.forward_reference(p, ARGS, t))


def reference_greedy(prompt: list[int], n: int) -> list[int]:
    """Greedy continuation from full (no-cache) forward passes, one token at a time."""
    seq, out = list(prompt), []
    for _ in range(n):
        padded = np.zeros(MAX_LEN, np.int32)          # causal: padding after the sequence is inert
        padded[:len(seq)] = seq
        tok = int(jnp.argmax(_ref(PARAMS, padded)[len(seq) - 1]))
        out.append(tok)
        seq.append(tok)
    return out


def prompt_of(n: int, start: int) -> list[int]:
    return [(start + 7 * i) % ARGS.vocab_size for i in range(n)]


class Collector:
    def __init__(self, cancel_after: int | None = None, orch: Orchestrator | None = None,
                 rid: str = "", raise_after: int | None = None) -> None:
        self.tokens: list[int] = []
        self.finish: str | None = None
        self.calls_after_finish = 0
        self.done = threading.Event()
        self.cancel_after, self.orch, self.rid, self.raise_after = cancel_after, orch, rid, raise_after

    def __call__(self, tok, reason) -> None:
        if self.finish is not None:
            self.calls_after_finish += 1
        if tok is not None:
            self.tokens.append(tok)
        if reason is not None:
            self.finish = reason
            self.done.set()
            return
        if self.cancel_after is not None and len(self.tokens) == self.cancel_after:
            self.orch.cancel(self.rid)
        if self.raise_after is not None and len(self.tokens) == self.raise_after:
            raise RuntimeError("client went away")


def run_requests(engine, reqs: list[tuple[list[int], SamplingParams]], **kw):
    orch = Orchestrator(engine, max_queue=16)
    cols = []
    orch.start()
    try:
        for i, (prompt, sp) in enumerate(reqs):
            c = Collector(orch=orch, rid=f"r{i}", **kw)
            cols.append(c)
            orch.submit(GenRequest(f"r{i}", prompt, sp, c))
        for c in cols:
            assert c.done.wait(60), "request did not finish"
        return cols, orch.stats()
    finally:
        orch.stop()


def test_engine_greedy_matches_reference_with_staggered_joins(engine):
    prompts = {0: prompt_of(5, 1), 2: prompt_of(20, 50), 1: prompt_of(33, 9), 3: prompt_of(1, 400)}
    join_at = {0: 0, 2: 3, 1: 5, 3: 6}                   # the step at which each request joins
    got: dict[int, list[int]] = {}
    for step in range(14):
        for slot, at in join_at.items():
            if at == step:
                pre = engine.prefill(prompts[slot], SamplingParams(max_tokens=99))
                engine.insert(pre, slot)
                got[slot] = [pre.first_token]
        toks = engine.generate()
        for slot in got:
            got[slot].append(int(toks[slot]))
    for slot in range(SLOTS):
        engine.free(slot)
    for slot, toks in got.items():
        assert toks == reference_greedy(prompts[slot], len(toks)), f"slot {slot}"
    assert len(set(got[0])) > 3                           # the test model does not just repeat


def test_decode_logits_match_reference(engine):
    prompt = prompt_of(9, 3)
    pre = engine.prefill(prompt, None)
    engine.insert(pre, 1)
    step = jax.jit(lambda p, c, t, pos: M.decode(p, ARGS, c, t, pos, MAX_LEN)[0])
    # copies: JAX:CPU may read a numpy argument in place, after free() has changed it
    cache_logits = np.asarray(step(PARAMS, engine.cache, engine.tokens.copy(), engine.pos.copy()))
    engine.free(1)
    seq = np.zeros(MAX_LEN, np.int32)
    seq[:len(prompt) + 1] = prompt + [pre.first_token]
    ref = _ref(PARAMS, seq)[len(prompt)]
    np.testing.assert_allclose(np.asarray(cache_logits[1]), np.asarray(ref), rtol=1e-4, atol=1e-4)


def test_orchestrator_queue_more_requests_than_slots(engine):
    lens, maxt = [3, 17, 40, 8, 25, 2], [6, 4, 9, 12, 1, 5]
    reqs = [(prompt_of(n, 11 * i), SamplingParams(max_tokens=m)) for i, (n, m) in enumerate(zip(lens, maxt))]
    cols, stats = run_requests(engine, reqs)
    for (prompt, sp), c in zip(reqs, cols):
        assert c.finish == "length" and len(c.tokens) == sp.max_tokens
        assert c.tokens == reference_greedy(prompt, sp.max_tokens)
        assert c.calls_after_finish == 0
    assert stats["running"] == 0 and stats["waiting"] == 0 and stats["kv_cache_usage"] == 0.0
    assert stats["generated_tokens_total"] == sum(maxt)
    assert engine.active.sum() == 0


def test_context_limit_finishes_with_length(engine):
    prompt = prompt_of(MAX_LEN - 4, 5)
    cols, _ = run_requests(engine, [(prompt, SamplingParams(max_tokens=100))])
    assert cols[0].finish == "length" and len(cols[0].tokens) == 4
    assert cols[0].tokens == reference_greedy(prompt, 4)


def test_sampling_seeded_reproducible_and_greedy_limits(engine):
    p = prompt_of(12, 77)
    greedy = reference_greedy(p, 10)
    reqs = [(p, SamplingParams(max_tokens=10, temperature=1.0, seed=7)),
            (p, SamplingParams(max_tokens=10, temperature=1.0, seed=7)),
            (p, SamplingParams(max_tokens=10, temperature=1.0, seed=8)),
            (p, SamplingParams(max_tokens=10, temperature=0.0, seed=9)),
            (p, SamplingParams(max_tokens=10, temperature=1.0, top_p=1e-6, seed=10))]
    cols, _ = run_requests(engine, reqs)
    a, b, c, t0, tp = (x.tokens for x in cols)
    assert a == b                          # same seed, same tokens (batched with others)
    assert a != c and a != greedy          # a different seed / real sampling differ
    assert t0 == greedy and tp == greedy   # temperature 0 and a tiny top-p are greedy
    alone, _ = run_requests(engine, reqs[:1])
    assert alone[0].tokens == a            # independent of what else is in the batch


def test_eos_stops_unless_ignore_eos(engine):
    p = prompt_of(10, 200)
    greedy = reference_greedy(p, 8)
    eos = greedy[3]
    k = greedy.index(eos)                  # first occurrence
    engine.eos_ids = {eos}
    try:
        cols, _ = run_requests(engine, [(p, SamplingParams(max_tokens=8)),
                                        (p, SamplingParams(max_tokens=8, ignore_eos=True))])
    finally:
        engine.eos_ids = set()
    assert cols[0].finish == "stop" and cols[0].tokens == greedy[:k]   # EOS itself not delivered
    assert cols[1].finish == "length" and cols[1].tokens == greedy


def test_cancel_and_raising_callback_free_the_slot(engine):
    reqs = [(prompt_of(6, 1), SamplingParams(max_tokens=40)),
            (prompt_of(6, 2), SamplingParams(max_tokens=40))]
    orch = Orchestrator(engine, max_queue=4)
    orch.start()
    try:
        c0 = Collector(cancel_after=3, orch=orch, rid="a")
        c1 = Collector(raise_after=2)
        orch.submit(GenRequest("a", *reqs[0], c0))
        orch.submit(GenRequest("b", *reqs[1], c1))
        assert c0.done.wait(30) and c1.done.wait(30)
        assert c0.finish == "abort" and 3 <= len(c0.tokens) < 40
        assert c1.finish == "abort" and len(c1.tokens) == 2
        c2 = Collector()                   # the engine thread survived; the slots are reusable
        orch.submit(GenRequest("c", prompt_of(4, 3), SamplingParams(max_tokens=3), c2))
        assert c2.done.wait(30) and c2.finish == "length"
        assert orch.stats()["running"] == 0 and orch.error is None
    finally:
        orch.stop()
    assert engine.active.sum() == 0


def test_queue_full_too_long_and_stop_aborts_waiting(engine):
    orch = Orchestrator(engine, max_queue=2)          # not started: everything stays waiting
    cols = [Collector() for _ in range(2)]
    for i, c in enumerate(cols):
        orch.submit(GenRequest(f"q{i}", [1, 2, 3], SamplingParams(max_tokens=2), c))
    with pytest.raises(QueueFull):
        orch.submit(GenRequest("q2", [1, 2, 3], SamplingParams(max_tokens=2), Collector()))
    with pytest.raises(RequestTooLong):
        orch.submit(GenRequest("long", [1] * MAX_LEN, SamplingParams(max_tokens=1), Collector()))
    assert orch.stats()["waiting"] == 2
    orch.start()
    orch.stop()
    assert all(c.finish in ("abort", "length") for c in cols)
    assert all(c.done.is_set() for c in cols)


def test_sample_distribution_and_nucleus():
    from servers.jax.sampling import greedy, request_key, sample

    n = 4000
    logits = np.tile(np.log(np.array([0.5, 0.3, 0.2, 1e-9], np.float32)), (n, 1))   # [n, 4]
    keys = np.stack([request_key(i) for i in range(n)])
    step = np.zeros(n, np.int32)
    one = np.ones(n, np.float32)
    f = jax.jit(sample)
    freq = np.bincount(np.asarray(f(logits, one, one, keys, step)), minlength=4) / n
    np.testing.assert_allclose(freq[:3], [0.5, 0.3, 0.2], atol=0.04)
    nucleus = np.bincount(np.asarray(f(logits, one, one * 0.6, keys, step)), minlength=4) / n
    np.testing.assert_allclose(nucleus, [0.625, 0.375, 0.0, 0.0], atol=0.04)   # 0.5 + 0.3 >= 0.6
    assert (np.asarray(f(logits, one * 0, one, keys, step)) == 0).all()
    rnd = np.random.default_rng(0).standard_normal((8, 1000)).astype(np.float32)
    rnd[3, 17] = rnd[3, 900] = 50.0                                 # a tie: the lowest index wins
    assert (np.asarray(greedy(rnd)) == np.argmax(rnd, axis=-1)).all()


def a_then_b(orch: Orchestrator, long_prompt: list[int], a_tokens: int):
    """Stream "a" decodes; at its 2nd token "b" (long_prompt) is submitted. Returns the order of
    events ("a", "submit-b", "b" per token) and each stream's tokens."""
    log: list[str] = []
    done = {k: threading.Event() for k in "ab"}
    toks: dict[str, list[int]] = {"a": [], "b": []}

    def cb(name):
        def on_token(tok, reason):
            if tok is not None:
                toks[name].append(tok)
                log.append(name)
            if name == "a" and len(toks["a"]) == 2 and reason is None:
                log.append("submit-b")
                orch.submit(GenRequest("b", long_prompt, SamplingParams(max_tokens=3), cb("b")))
            if reason is not None:
                done[name].set()
        return on_token

    orch.start()
    try:
        orch.submit(GenRequest("a", prompt_of(4, 1), SamplingParams(max_tokens=a_tokens), cb("a")))
        assert done["a"].wait(60) and done["b"].wait(60)
    finally:
        orch.stop()
    return log, toks


def test_long_prompt_is_prefilled_in_chunks_between_decode_steps(engine):
    orch = Orchestrator(engine, max_queue=4)   # budget 512, but one interleave chunk per step
                                               # while a stream decodes
    long_prompt = prompt_of(60, 13)                                # 4 pieces of 16
    log, toks = a_then_b(orch, long_prompt, 12)
    between = log[log.index("submit-b"):log.index("b")]
    assert between.count("a") >= 2            # a kept decoding while b's chunks ran
    assert toks["b"] == reference_greedy(long_prompt, 3)
    assert toks["a"] == reference_greedy(prompt_of(4, 1), 12)


def test_fused_pieces_only_while_streams_decode():
    e = Engine(ARGS, PARAMS, dtype="fp32", slots=SLOTS, max_model_len=MAX_LEN, eos_ids=set(),
               prefill_chunk=32, interleave_chunk=16)
    p = prompt_of(40, 5)                                           # bucket 64
    alone, crowd = e.start_prefill(p), e.start_prefill(p, slot=1)
    assert (alone.offsets, alone.chunk, alone.slot) == ([0, 32], 32, None)
    assert (crowd.chunk, crowd.slot, crowd.done) == (16, 1, 0)
    assert e.pos[1] == MAX_LEN - 1               # the step's garbage row for slot 1 lands there
    assert e.start_prefill(prompt_of(12, 5), slot=1).slot is None   # short: one shot
    assert e.prefill_buckets == [16, 32, 64]
    with pytest.raises(ValueError, match="interleave_chunk"):
        Engine(ARGS, PARAMS, slots=SLOTS, max_model_len=MAX_LEN, interleave_chunk=-1)
    assert Engine(ARGS, PARAMS, slots=1, max_model_len=MAX_LEN, interleave_chunk=0).start_prefill(
        p, slot=0).slot is None                                    # 0: never fused
    eight = Engine(ARGS, PARAMS, slots=2, max_model_len=MAX_LEN, interleave_chunk=8)  # not a bucket
    assert (eight.interleave_chunk, eight.interleave_long) == (8, 32)
    assert e.interleave_long == 0                                  # 4 x 16 does not fit in 64
    job, sizes = eight.start_prefill(p, slot=1), []
    while True:                                # a long backlog: one 32-token piece, then 8s
        before = job.done
        _, prefix = eight.generate_with(job, long=True)
        sizes.append(job.done - before)
        if prefix is not None:
            break
    assert sizes == [32, 8] and job.done == 40 and prefix.first_token == reference_greedy(p, 1)[0]
    big = Engine(ARGS, PARAMS, slots=1, max_model_len=512)
    assert big.prefill_buckets == [16, 32, 64, 96, 128, 192, 256, 384, 512]   # 1.5x steps from 64
    assert e.prefill(p).first_token == reference_greedy(p, 1)[0]


def test_fused_prefill_rides_in_decode_steps_and_matches_reference(engine):
    a, b = prompt_of(6, 2), prompt_of(45, 31)                     # b: 3 pieces of 16, fused
    pre = engine.prefill(a, SamplingParams(max_tokens=99))
    engine.insert(pre, 0)
    got_a = [pre.first_token]
    job = engine.start_prefill(b, SamplingParams(max_tokens=99), slot=2)
    assert (job.slot, job.chunk, job.done) == (2, 16, 0)
    pieces = 0
    while True:                                                    # a decodes while b prefills
        toks, prefix = engine.generate_with(job)
        got_a.append(int(toks[0]))
        pieces += 1
        if prefix is not None:
            break
    assert pieces == 3 and prefix.kv is None                      # K/V already in slot 2's rows
    engine.insert(prefix, 2)
    got_b = [prefix.first_token]
    for _ in range(5):
        toks = engine.generate()
        got_a.append(int(toks[0]))
        got_b.append(int(toks[2]))
    engine.free(0)
    engine.free(2)
    assert got_a == reference_greedy(a, len(got_a))
    assert got_b == reference_greedy(b, len(got_b))


@pytest.mark.parametrize("catch_up,pieces", [(1, 3), (10_000, 6)])
def test_long_backlog_prefills_in_catch_up_pieces(catch_up, pieces):
    e = Engine(ARGS, PARAMS, slots=2, max_model_len=MAX_LEN, eos_ids=set(), interleave_chunk=8)
    long_prompt = prompt_of(45, 3)                                 # 32 + 8 + 8, or 6 x 8
    log, toks = a_then_b(Orchestrator(e, max_queue=4, catch_up_tokens=catch_up), long_prompt, 20)
    assert log[log.index("submit-b"):log.index("b")].count("a") == pieces   # one piece per step
    assert toks["b"] == reference_greedy(long_prompt, 3)
