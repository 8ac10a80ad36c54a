"""The embeddings path of the engine and the orchestrator on the tiny preset (fp32): the pooled
vector equals a numpy pooling of the no-cache reference forward (one-shot and chunked inputs alike),
is unit length, and rides the orchestrator's loop beside running streams without changing them."""
from __future__ import annotations

import threading

import jax
import numpy as np
import pytest

from servers.jax import model as M
from servers.jax.engine import Engine
from servers.jax.orchestrator import Orchestrator
from servers.jax.requests import EmbedRequest, GenRequest, QueueFull, RequestTooLong, SamplingParams
from servers.jax.presets import get_preset

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

MAX_LEN = 64
ARGS = get_preset("tiny")
PARAMS = M.init_params(ARGS, "fp32", seed=5, std=0.2)


@pytest.fixture(scope="module")
def engine() -> Engine:
    e = Engine(ARGS, PARAMS, dtype="fp32", slots=2, max_model_len=MAX_LEN, eos_ids=set(),
               prefill_chunk=16, interleave_chunk=16)   # inputs > 16 tokens: pooled chunk by chunk
    e.warmup()
    return e


_hidden = jax.jit(lambda p, t: M.rms_norm(M.prefill(p, ARGS, t)[0], p["norm"], ARGS.norm_eps))


def reference(ids: list[int]) -> np.ndarray:
    """Mean of the final-normed hidden rows of the input's tokens, L2-normalised (numpy)."""
    padded = np.zeros(MAX_LEN, np.int32)                 # causal: padding after the input is inert
    padded[:len(ids)] = ids
    h = np.asarray(_hidden(PARAMS, padded), np.float64)[:len(ids)]
    v = h.mean(axis=0)
    return v / np.linalg.norm(v)


def ids_of(n: int, start: int) -> list[int]:
    return [(start + 11 * i) % ARGS.vocab_size for i in range(n)]


@pytest.mark.parametrize("n", [1, 5, 16, 17, 40, MAX_LEN])   # one shot; chunked with an overlap
def test_embed_matches_the_reference_pooling(engine, n):
    ids = ids_of(n, n)
    v = engine.embed(ids)
    assert v.dtype == np.float32 and v.shape == (ARGS.dim,)
    assert abs(float(np.linalg.norm(v.astype(np.float64))) - 1.0) < 1e-5
    np.testing.assert_allclose(v, reference(ids), atol=2e-5)


def test_embed_is_deterministic_and_input_dependent(engine):
    a, b = engine.embed(ids_of(30, 1)), engine.embed(ids_of(30, 1))
    assert np.array_equal(a, b)
    assert float(np.dot(a, engine.embed(ids_of(30, 2)))) < 0.9999


def test_embed_refuses_empty_and_too_long(engine):
    for ids in ([], [1] * (MAX_LEN + 1)):
        with pytest.raises(ValueError, match="input length"):
            engine.start_embed(ids)


class Done:
    def __init__(self) -> None:
        self.ev, self.vectors, self.reason = threading.Event(), None, None

    def __call__(self, vectors, reason) -> None:
        self.vectors, self.reason = vectors, reason
        self.ev.set()


class Tokens:
    def __init__(self) -> None:
        self.tokens, self.fin = [], threading.Event()

    def __call__(self, tok, reason) -> None:
        if tok is not None:
            self.tokens.append(tok)
        if reason is not None:
            self.fin.set()


def test_orchestrator_embeds_between_decode_steps(engine):
    """An embeddings request of three inputs while a greedy stream decodes: the vectors come in
    input order and equal engine.embed's; the stream's tokens are those it gets alone."""
    orch = Orchestrator(engine)
    orch.start()
    try:
        alone, beside = Tokens(), Tokens()
        orch.submit(GenRequest("g0", ids_of(8, 3), SamplingParams(24), alone))
        assert alone.fin.wait(60)
        orch.submit(GenRequest("g1", ids_of(8, 3), SamplingParams(24), beside))
        inputs = [ids_of(5, 1), ids_of(40, 2), ids_of(16, 3)]
        done = Done()
        orch.submit_embed(EmbedRequest("e1", inputs, done))
        assert done.ev.wait(60) and beside.fin.wait(60)
        assert done.reason is None and len(done.vectors) == 3
        for v, ids in zip(done.vectors, inputs):
            np.testing.assert_array_equal(v, engine.embed(ids))
        assert beside.tokens == alone.tokens and len(alone.tokens) == 24
        st = orch.stats()
        assert st["embed_requests_total"] == 1 and st["embed_inputs_total"] == 3
        assert st["embed_tokens_total"] == 61
    finally:
        orch.stop()


def test_orchestrator_embed_checks_and_cancel(engine):
    orch = Orchestrator(engine, max_queue=1)          # not started: requests stay queued
    with pytest.raises(RequestTooLong):
        orch.submit_embed(EmbedRequest("x", [[1] * (MAX_LEN + 1)], Done()))
    with pytest.raises(RequestTooLong):
        orch.submit_embed(EmbedRequest("x", [], Done()))
    d = Done()
    orch.submit_embed(EmbedRequest("e", [[1, 2]], d))
    with pytest.raises(QueueFull):
        orch.submit_embed(EmbedRequest("f", [[1, 2]], Done()))
    orch.cancel("e")
    orch.start()
    try:
        assert d.ev.wait(30) and d.reason == "abort" and d.vectors is None
    finally:
        orch.stop()
