"""Automatic prefix caching: the hash chain and LRU (pure), then the engine on the tiny preset —
a hit's output equals the output without the cache (greedy, and seeded sampling), the counters
are in tokens, and a hit compiles nothing new."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from servers.jax.prefix_cache import PrefixCache, block_hashes


# ---- pure: hashing and LRU ----------------------------------------------------------------------
def test_hash_chain_covers_every_token_before_the_block():
    a = block_hashes(list(range(40)), 16)
    assert len(a) == 2                                         # the partial third block: no hash
    b = block_hashes([99] + list(range(1, 40)), 16)            # first token differs
    assert a[0] != b[0] and a[1] != b[1]                       # the chain carries it on
    c = block_hashes(list(range(32)) + [7] * 8, 16)            # same first 32 tokens
    assert c == a
    assert block_hashes(list(range(16)), 8)[1] != block_hashes(list(range(8, 16)), 8)[0]


def test_match_longest_prefix_leaves_the_last_token_and_counts_tokens():
    pc = PrefixCache(8, 4)
    ids = list(range(12))                                      # 3 full blocks
    hashes, found = pc.match(ids)
    assert found == [] and (pc.queries, pc.hits) == (12, 0)
    assert [b for b, _ in pc.store(hashes, 0)] == [0, 1, 2]
    _, found = pc.match(ids)                                   # same prompt: 2 blocks, not 3
    assert len(found) == 2 and (pc.queries, pc.hits) == (24, 8)
    _, found = pc.match(list(range(8)) + [50, 51, 52, 53, 54])  # diverges in block 2
    assert len(found) == 2 and pc.hits == 16
    _, found = pc.match([1] + list(range(1, 12)))              # diverges in block 0
    assert found == [] and pc.queries == 24 + 13 + 12
    assert pc.store(hashes, 0) == []                            # already cached: nothing to copy


def test_lru_bound_evicts_least_recent_tail_first_never_own_chain():
    pc = PrefixCache(4, 2)
    a, b = block_hashes([1, 2, 3, 4], 2), block_hashes([5, 6, 7, 8], 2)
    pc.store(a, 0)
    pc.store(b, 0)
    assert len(pc) == 4
    pc.match([1, 2, 3, 4, 9])                                  # a is now the most recent
    c = block_hashes([9, 9, 9, 9], 2)
    stored = pc.store(c, 0)
    assert len(stored) == 2 and len(pc) == 4                   # bounded: b's two blocks went
    assert len(pc.match([5, 6, 7, 8, 0])[1]) == 0
    assert len(pc.match([1, 2, 3, 4, 0])[1]) == 2
    d = block_hashes([4, 4], 2)
    pc.store(d, 0)                                             # evicts c's TAIL block first
    assert len(pc.match([9, 9, 9, 9, 0])[1]) == 1
    big = block_hashes(list(range(20)), 2)                     # 10 blocks > pool: stops at 4
    assert len(pc.store(big, 0)) == 4 and len(pc) == 4
    assert pc.reset() == 4 and len(pc) == 0 and pc.match([1, 2, 3])[1] == []


def test_bad_sizes_refused():
    with pytest.raises(ValueError, match="n_blocks"):
        PrefixCache(0, 16)


# ---- engine: a hit gives the same tokens ----------------------------------------------------------
jax = pytest.importorskip("jax")

from servers.jax import model as M                                  # noqa: E402
from servers.jax.engine import Engine                               # noqa: E402
from servers.jax.orchestrator import Orchestrator                   # noqa: E402
from servers.jax.presets import get_preset                          # noqa: E402
from servers.jax.requests import GenRequest, SamplingParams         # noqa: E402

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

ARGS = get_preset("tiny")
PARAMS = M.init_params(ARGS, "fp32", seed=3, std=0.2)      # std 0.2: varied greedy text (test_engine)
MAX_LEN = 128


def make(prefix_cache: bool, blocks=None) -> Engine:
    e = Engine(ARGS, PARAMS, dtype="fp32", slots=4, max_model_len=MAX_LEN, eos_ids=set(),
               prefill_chunk=32, interleave_chunk=16, prefix_cache=prefix_cache,
               prefix_block=16, prefix_cache_blocks=blocks)
    e.warmup()
    return e


@pytest.fixture(scope="module")
def engines():
    return make(False), make(True)


def run(engine, reqs, sequential=True):
    """[(prompt, SamplingParams)] → [(tokens, cached_tokens)], one after another (or all at once)."""
    orch = Orchestrator(engine, max_queue=16)
    orch.start()
    out = []
    try:
        pending = []
        for i, (prompt, sp) in enumerate(reqs):
            toks, done = [], threading.Event()

            def cb(tok, reason, toks=toks, done=done):
                if tok is not None:
                    toks.append(tok)
                if reason is not None:
                    done.set()
            req = GenRequest(f"r{i}", list(prompt), sp, cb)
            orch.submit(req)
            pending.append((req, toks, done))
            if sequential:
                assert done.wait(60)
        for req, toks, done in pending:
            assert done.wait(60)
            out.append((toks, req.cached_tokens))
        return out, orch.stats()
    finally:
        orch.stop()


def prompts():
    rng = np.random.default_rng(5)
    shared = rng.integers(1, ARGS.vocab_size, 50).tolist()    # 3 full blocks of 16 + 2
    tails = [rng.integers(1, ARGS.vocab_size, n).tolist() for n in (9, 30, 1, 14)]
    return [shared + t for t in tails]


def test_hit_output_equals_the_output_without_cache(engines):
    off, on = engines
    ps = prompts()
    greedy = [(p, SamplingParams(max_tokens=12)) for p in ps]
    seeded = [(p, SamplingParams(max_tokens=12, temperature=0.9, top_p=0.9, seed=7)) for p in ps]
    for reqs in (greedy, seeded):
        want, _ = run(off, reqs)
        on.prefix.reset()
        got, st = run(on, reqs)
        assert [t for t, _ in got] == [t for t, _ in want]
        assert [c for _, c in want] == [0, 0, 0, 0]
        assert [c for _, c in got] == [0, 48, 48, 48]          # 3 shared blocks of 16
    # counters: tokens, monotonic (a reset forgets blocks, not counts), two runs of 4 lookups
    assert st["prefix_cache_queries_total"] == 2 * sum(len(p) for p in ps)
    assert st["prefix_cache_hits_total"] == 2 * 3 * 48
    assert "prefix_cache_hits_total" not in run(off, greedy[:1])[1]


def test_hits_while_other_streams_decode_and_evicted_pool(engines):
    off, on = engines
    ps = prompts()
    reqs = [(p, SamplingParams(max_tokens=20)) for p in ps]
    want, _ = run(off, reqs, sequential=False)
    on.prefix.reset()
    run(on, reqs[:1])                                          # the shared blocks are cached
    got, _ = run(on, reqs, sequential=False)                   # all at once: fused hits
    assert [t for t, _ in got] == [t for t, _ in want]
    assert all(c == 48 for _, c in got)
    small = make(True, blocks=2)                               # 2 blocks: LRU-bounded
    got, _ = run(small, reqs)
    assert [t for t, _ in got] == [t for t, _ in want]
    assert max(c for _, c in got) <= 32 and len(small.prefix.index) <= 2


def test_a_hit_compiles_nothing_new(engines):
    _, on = engines
    on.prefix.reset()
    run(on, [(prompts()[0], SamplingParams(max_tokens=3))])
    sizes = {f: getattr(on, f)._cache_size() for f in ("_prefill", "_chunk", "_fused", "_decode")}
    sizes.update(load=on.prefix._load._cache_size(), save=on.prefix._save._cache_size())
    rng = np.random.default_rng(9)
    for n in (17, 40, 77, 100):                                # hits of 1 to 6 blocks
        p = rng.integers(1, ARGS.vocab_size, n).tolist()
        run(on, [(p, SamplingParams(max_tokens=2)), (p, SamplingParams(max_tokens=2))])
    after = {f: getattr(on, f)._cache_size() for f in ("_prefill", "_chunk", "_fused", "_decode")}
    after.update(load=on.prefix._load._cache_size(), save=on.prefix._save._cache_size())
    assert after == sizes and sizes["load"] == sizes["save"] == 1
