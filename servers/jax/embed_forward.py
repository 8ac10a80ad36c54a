"""/v1/embeddings on the engine: a prefill-only forward of one input (padded to a prefill bucket,
chunked like a prompt past ``prefill_chunk``; no cache, no slot) → the mean of its final hidden
states (after the final RMSNorm), L2-normalised: float32 [dim].

    EmbedJob                              one input on its way through the pooled forward
    EmbedForward.start_embed(ids) -> job; embed_step(job) -> vector | None; embed(ids) -> vector
                                          the Engine's (servers.jax.engine) embedding methods: they
                                          use its jitted _embed / _chunk / _pool, prefill buckets
                                          and params, and never touch the slots
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import model as M


@dataclass
class EmbedJob:
    """One /v1/embeddings input on its way through the pooled forward (``embed_step``)."""
    tokens: np.ndarray            # [bucket] int32, the input then padding
    length: int
    offsets: list[int]            # chunk starts still to run; [] = one shot
    chunk: int = 0
    kv: Any = None                # chunked: the input's own K/V buffer (never the slots' cache)
    done: int = 0                 # positions [0, done) are in ``acc``
    acc: Optional[np.ndarray] = None   # float64 [D]: sum of the normed hidden rows so far


class EmbedForward:
    """Mixed into servers.jax.engine.Engine: its /v1/embeddings methods."""

    def start_embed(self, ids: list[int]) -> EmbedJob:
        """An input of 1..max_model_len tokens (no token is generated, so the whole context)."""
        n = len(ids)
        if n == 0 or n > self.max_model_len:
            raise ValueError(f"input length {n} must be in [1, {self.max_model_len}]")
        b = self.prefill_bucket(n)
        toks = np.zeros(b, np.int32)
        toks[:n] = ids
        c = self.prefill_chunk
        return EmbedJob(toks, n, M.chunk_offsets(n, c, b) if c and n > c else [], c)

    def embed_step(self, job: EmbedJob) -> Optional[np.ndarray]:
        """Run the next chunk of ``job`` (or the whole input, one forward); once the input is
        done: its embedding, the mean of the normed final hidden rows, L2-normalised (float32)."""
        if not job.offsets:
            acc = np.asarray(self._embed(self.params, job.tokens, np.int32(job.length)), np.float64)
            job.done = job.length
        else:
            if job.kv is None:
                job.kv = self._empty_kv(job.tokens.shape[0])
                job.acc = np.zeros(self.args.dim, np.float64)
            off = job.offsets.pop(0)
            x, job.kv = self._chunk(self.params, job.kv, job.tokens[off:off + job.chunk], np.int32(off))
            part = self._pool(self.params, x, np.int32(off), np.int32(job.done), np.int32(job.length))
            job.acc += np.asarray(part, np.float64)          # an overlapping last chunk: rows once
            job.done = min(off + job.chunk, job.length)
            if job.offsets:
                return None
            acc, job.kv = job.acc, None
        mean = acc / job.length
        norm = float(np.linalg.norm(mean))
        return (mean / norm if norm > 0 else mean).astype(np.float32)

    def embed(self, ids: list[int]) -> np.ndarray:
        """One input's embedding at once (every chunk): float32 [dim], unit length."""
        job = self.start_embed(ids)
        while True:
            v = self.embed_step(job)
            if v is not None:
                return v
