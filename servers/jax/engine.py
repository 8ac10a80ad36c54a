"""The engine: prefill / insert / generate / free over a fixed set of slots (the JetStream seam).

    prefill(prompt_ids, params) -> Prefix       one prompt, padded to a power-of-two bucket, jitted
                                                per bucket; samples the first token
    start_prefill(...) -> job; prefill_step(job) the same in pieces: a prompt longer than
                                                ``prefill_chunk`` runs one chunk per call, so the
                                                orchestrator can interleave it with decode steps
    start_prefill(..., slot=s) -> fused job     (other streams decoding) pieces of
                                                ``interleave_chunk`` tokens (``interleave_long``
                                                with long=True) that ride in decode steps:
                                                generate_with(job, long) -> (tokens, Prefix|None)
    insert(prefix, slot)                        copies the prefix K/V into the slot's cache rows
    generate() -> np.ndarray[slots]             ONE jitted decode step for all slots, KV cache
                                                donated (updated in place); one device→host copy

Fused prefill (vLLM's chunked prefill): a piece's C rows join the B decode rows in every matmul,
so the weights are read once for both and a running stream waits one slightly longer step, not a
whole prefill. Measured here (small preset, 8 slots, attention bucket 192, in-process): plain
step 19-29 ms at batch 1-4; with a 16-token piece 44-45 ms; a separate 16-token prefill call
would add ~33 ms and a one-shot 64-token prefill ~90 ms to the gap. Writing the piece's K/V with
dynamic_update_slice made XLA:CPU copy the whole cache (the fused step took 61-88 ms); scatters
stay in place.
    free(slot)                                  the slot is reusable at once
    start_embed(ids) -> job; embed_step(job)    /v1/embeddings: a prefill-only forward of one
                                                input (padded to a prefill bucket, chunked like a
                                                prompt past ``prefill_chunk``; no cache, no slot) →
                                                the mean of its final hidden states (after the
                                                final RMSNorm), L2-normalised: float32 [dim]
                                                (servers/jax/embed_forward.py)

Host-side state per slot (numpy): last token, position (= tokens in cache), sampling parameters,
key, generated-token counter. Inactive slots still run through the batched step (their results are
ignored; their cache rows hold garbage until the next insert overwrites them).

The decode step runs only slots [0, B), B the smallest power of two above the highest active
slot (batch 1 on a 64-slot engine costs batch 1, not 64), and its attention reads only
``attn_len`` positions: the smallest bucket (64, 128, 192, 256, 384, … max_len) above the
longest active sequence. One compiled step per (B, attn_len). ``warmup()`` compiles every prefill bucket, insert
and decode bucket before serving; ``compile_s`` says how long it took.

Measured here (small preset, context 128, in-process, bench/decode_roofline.py; shared 2-core
VM, so noisy): batch-1 step 11.6-16 ms (weights read at 25-34 GB/s against 43-56 GB/s for a
large XLA copy and 35-48 GB/s for XLA's own 393 MB GEMV); batch 32 ≈ 10x the batch-1 tokens/s.

CPU dtype (measured 2026-12-02 on this shared 2-core AMD EPYC VM, jax 0.10.2, ``small`` preset,
one slot, context 128, batch-1 decode step): fp32 13.9 ms/step (72 tok/s, weights read at
~29 GB/s); bf16 581.5 ms/step (2 tok/s), ~40x slower: XLA:CPU has no fast bf16 dot here. So fp32
is the CPU default (servers.jax.default_dtype); bf16 is the default on GPU/TPU.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import model as M
from .buckets import attn_buckets, buckets
from .embed_forward import EmbedForward
from .prefix_store import PrefixStore
from .presets import ModelArgs
from .sampling import request_key, sample

log = logging.getLogger("servers.jax")


@dataclass
class PrefillJob:
    tokens: np.ndarray            # [bucket] int32, the prompt then padding
    length: int
    temperature: float
    top_p: float
    key: np.ndarray
    offsets: list[int]            # chunk starts still to run; [] = one-shot prefill
    chunk: int = 0                # tokens per chunk (when offsets)
    kv: Any = None
    slot: Optional[int] = None    # set: fused job, its chunks ride in decode steps (generate_with)
    done: int = 0                 # fused: prompt positions [0, done) are in the slot's cache
    hashes: Optional[list] = None  # prefix cache on: the prompt's block hashes (prefix_cache.py)
    cached: int = 0               # prompt tokens whose K/V came from the prefix cache


@dataclass
class Prefix:
    kv: Any                       # per layer (k [Hkv, Dh, bucket], v [Hkv, bucket, Dh]) on device;
                                  # None: already in the slot's cache rows (a fused job)
    length: int                   # prompt tokens
    first_token: int
    temperature: float
    top_p: float
    key: np.ndarray               # [2] uint32
    hashes: Optional[list] = None  # prefix cache on: blocks to store once the prompt is in a slot
    cached: int = 0               # prompt tokens served from the prefix cache


class Engine(EmbedForward):
    def __init__(self, args: ModelArgs, params: M.Params, *, dtype: str = "fp32", slots: int = 8,
                 max_model_len: int = 1024, eos_ids: Optional[set[int]] = None,
                 min_prefill_bucket: int = 16, min_attn_bucket: int = 64,
                 prefill_chunk: int = 256, interleave_chunk: int = 16,
                 prefix_cache: bool = False, prefix_block: int = 16,
                 prefix_cache_blocks: Optional[int] = None) -> None:
        if max_model_len < 2:
            raise ValueError("max_model_len must be >= 2")
        self.args, self.params, self.dtype = args, params, dtype
        self.slots, self.max_model_len = int(slots), int(max_model_len)
        self.eos_ids = set(eos_ids or ())
        self.prefill_buckets = attn_buckets(min(min_prefill_bucket, max_model_len), max_model_len, 64)
        # prompts longer than prefill_chunk are prefilled in chunks of that many tokens (0: never)
        self.prefill_chunk = int(prefill_chunk) if 0 < prefill_chunk < max_model_len else 0
        # while other streams decode, a prompt longer than interleave_chunk is prefilled in pieces
        # of that many tokens, each inside a decode step (0: never; the orchestrator asks)
        self.interleave_chunk = int(interleave_chunk) if 0 < interleave_chunk < max_model_len else 0
        # the catch-up piece, 4x, used while the prefill backlog is long (generate_with(long=True))
        c4 = 4 * self.interleave_chunk
        self.interleave_long = c4 if 0 < c4 < max_model_len else 0
        if self.prefill_chunk and self.prefill_chunk not in self.prefill_buckets:
            raise ValueError(f"prefill_chunk {prefill_chunk} must be one of the prefill buckets "
                             f"{self.prefill_buckets}")
        if interleave_chunk < 0:
            raise ValueError(f"interleave_chunk must be >= 0, got {interleave_chunk}")
        self.attn_buckets = attn_buckets(min(min_attn_bucket, max_model_len), max_model_len)
        self.batch_buckets = buckets(1, self.slots)
        self.cache = M.init_cache(args, self.slots, self.max_model_len, dtype)
        s = self.slots
        self.tokens = np.zeros(s, np.int32)
        self.pos = np.zeros(s, np.int32)
        self.temperature = np.zeros(s, np.float32)
        self.top_p = np.ones(s, np.float32)
        self.keys = np.zeros((s, 2), np.uint32)
        self.step = np.zeros(s, np.int32)
        self.active = np.zeros(s, bool)
        self.compile_s: Optional[float] = None
        self._prefill = jax.jit(self._prefill_fn)
        self._chunk = jax.jit(self._chunk_fn, donate_argnums=(1,))
        self._last_logits = jax.jit(self._last_logits_fn)
        self._insert = jax.jit(self._insert_fn, donate_argnums=(0,))
        self._decode = jax.jit(self._decode_fn, static_argnums=(4,), donate_argnums=(1,))
        self._fused = jax.jit(self._fused_fn, static_argnums=(7,), donate_argnums=(1,))
        # sampling is its own jitted function (compiled for batch 1 and batch `slots`), so the
        # per-bucket programs do not each recompile the sort / random number code
        self._sample = jax.jit(sample)
        # /v1/embeddings: one prefill-only forward per bucket → the sum of the input's normed
        # final hidden rows; a chunked input sums each chunk's rows (_pool) after _chunk
        self._embed = jax.jit(self._embed_fn)
        self._pool = jax.jit(self._pool_fn)
        # automatic prefix caching (servers/jax/prefix_store.py): off unless asked
        self.prefix: Optional[PrefixStore] = None
        if prefix_cache:
            if not self.interleave_chunk:
                raise ValueError("the prefix cache needs interleave_chunk > 0 (a hit's remaining "
                                 "prompt is prefilled in fused pieces from the cached offset)")
            self.prefix = PrefixStore(args, dtype, self.slots, self.max_model_len, prefix_block,
                                      prefix_cache_blocks)

    # ---- jitted bodies -----------------------------------------------------------------------
    def _prefill_fn(self, params, tokens, length):
        x, ks, vs = M.prefill(params, self.args, tokens)           # x [Tb, D]
        last = jax.lax.dynamic_slice_in_dim(x, length - 1, 1, axis=0)   # [1, D]
        return M.logits_of(params, self.args, last), tuple(zip(ks, vs))  # [1, V], kv

    def _chunk_fn(self, params, kv, tokens, offset):
        return M.prefill_chunk(params, self.args, kv, tokens, offset)   # hidden [C, D], kv

    def _last_logits_fn(self, params, x, i):
        return M.logits_of(params, self.args, jax.lax.dynamic_slice_in_dim(x, i, 1, axis=0))

    def _pool_fn(self, params, x, off, lo, hi):
        """Σ over the rows of x [C, D] at positions off + i with lo <= position < hi of the
        final-normed hidden state (fp32 [D])."""
        h = M.rms_norm(x, params["norm"], self.args.norm_eps).astype(jnp.float32)
        pos = off + jnp.arange(x.shape[0])
        return jnp.sum(jnp.where(((pos >= lo) & (pos < hi))[:, None], h, 0.0), axis=0)

    def _embed_fn(self, params, tokens, length):
        x, _, _ = M.prefill(params, self.args, tokens)             # K/V unused: XLA drops them
        return self._pool_fn(params, x, 0, 0, length)

    @staticmethod
    def _insert_fn(cache, kv, slot):
        return M.insert_prefix(cache, kv, slot)

    def _decode_fn(self, params, cache, tokens, pos, attn_len):
        return M.decode(params, self.args, cache, tokens, pos, attn_len)  # logits [S, V], cache

    def _fused_fn(self, params, cache, tokens, pos, ctoks, cslot, coff, attn_len):
        return M.decode(params, self.args, cache, tokens, pos, attn_len, (ctoks, cslot, coff))

    # ---- the seam ----------------------------------------------------------------------------
    def prefill_bucket(self, n: int) -> int:
        for b in self.prefill_buckets:
            if b >= n:
                return b
        raise ValueError(f"prompt of {n} tokens exceeds max_model_len {self.max_model_len}")

    def start_prefill(self, prompt_ids: list[int], params: Any = None,
                      slot: Optional[int] = None, home: Optional[int] = None) -> PrefillJob:
        """params: anything with temperature / top_p / seed (orchestrator.SamplingParams).
        slot: other streams are decoding and the prompt goes to this slot; a prompt longer than
        ``interleave_chunk`` then becomes a fused job: pieces of that many tokens, each riding in
        a decode step (``generate_with``) and writing the slot's cache rows directly.
        home: the slot the prompt will go to (the prefix cache's): with the prefix cache on and
        a hit, the cached blocks are copied into home's rows [0, cached) and the rest of the
        prompt becomes a fused job from there (its pieces are the compiled fused-step shapes, so a
        hit adds no program: one per (batch, attention) bucket as before)."""
        n = len(prompt_ids)
        if n == 0 or n >= self.max_model_len:
            raise ValueError(f"prompt length {n} must be in [1, {self.max_model_len - 1}]")
        b = self.prefill_bucket(n)
        toks = np.zeros(b, np.int32)
        toks[:n] = prompt_ids
        temp = float(getattr(params, "temperature", 0.0) or 0.0)
        top_p = getattr(params, "top_p", None)
        top_p = 1.0 if top_p is None else float(top_p)
        seed = getattr(params, "seed", None)
        c, key = self.interleave_chunk, request_key(0 if seed is None else seed)
        hashes, cached = None, 0
        if self.prefix is not None and home is not None:
            hashes, cached = self.prefix.lookup(prompt_ids, home, self)
            if cached:                                             # a hit: fused from `cached`
                slot = home
        if slot is not None and c and (n > c or cached):           # fused: positions up to max_len
            toks = np.zeros(self.max_model_len, np.int32)
            toks[:n] = prompt_ids
            self.active[slot] = False
            self.pos[slot] = self.max_model_len - 1    # the step's garbage row writes land here,
            return PrefillJob(toks, n, temp, top_p, key, [], c, slot=int(slot),   # not on the prompt
                              done=cached, hashes=hashes, cached=cached)
        c = self.prefill_chunk
        offsets = M.chunk_offsets(n, c, b) if c and n > c else []
        return PrefillJob(toks, n, temp, top_p, key, offsets, c, hashes=hashes)

    def prefill_step(self, job: PrefillJob) -> Optional[Prefix]:
        """Run the next chunk of job (or the whole prompt); the Prefix once the prompt is done."""
        if not job.offsets:                                        # one shot
            logits, kv = self._prefill(self.params, job.tokens, np.int32(job.length))
        else:
            if job.kv is None:
                job.kv = self._empty_kv(job.tokens.shape[0])
            off = job.offsets.pop(0)
            x, job.kv = self._chunk(self.params, job.kv, job.tokens[off:off + job.chunk], np.int32(off))
            if job.offsets:
                return None
            logits, kv = self._last_logits(self.params, x, np.int32(job.length - 1 - off)), job.kv
        return self._prefix(job, logits, kv)

    def _prefix(self, job: PrefillJob, logits, kv) -> Prefix:
        """The finished prompt: its first token sampled from the last position's logits [1, V]."""
        tok = self._sample(logits, np.full(1, job.temperature, np.float32),
                           np.full(1, job.top_p, np.float32), job.key[None], np.zeros(1, np.int32))
        return Prefix(kv, job.length, int(tok[0]), job.temperature, job.top_p, job.key,
                      job.hashes, job.cached)

    def prefill(self, prompt_ids: list[int], params: Any = None) -> Prefix:
        """The whole prompt at once (chunk after chunk when it is longer than prefill_chunk)."""
        job = self.start_prefill(prompt_ids, params)
        while True:
            pre = self.prefill_step(job)
            if pre is not None:
                return pre

    def _empty_kv(self, tb: int):
        a, dt = self.args, M.DTYPES[self.dtype]
        return tuple((jnp.zeros((a.n_kv_heads, a.head_dim, tb), dt), jnp.zeros((a.n_kv_heads, tb, a.head_dim), dt))
                     for _ in range(a.n_layers))

    def insert(self, prefix: Prefix, slot: int) -> None:
        if prefix.kv is not None:                                  # fused: already in place
            self.cache = self._insert(self.cache, prefix.kv, np.int32(slot))
        self.tokens[slot] = prefix.first_token
        self.pos[slot] = prefix.length
        self.temperature[slot] = prefix.temperature
        self.top_p[slot] = prefix.top_p
        self.keys[slot] = prefix.key
        self.step[slot] = 1
        self.active[slot] = True
        if self.prefix is not None and prefix.hashes:             # the prompt's full blocks, kept
            self.prefix.store(prefix.hashes, slot, self)
            prefix.hashes = None

    def attn_bucket(self) -> int:
        need = int(self.pos[self.active].max()) + 1 if self.active.any() else 1
        for b in self.attn_buckets:
            if b >= need:
                return b
        return self.attn_buckets[-1]

    def batch_bucket(self) -> int:
        """Slots [0, B) run through the step: B is a bucket above the highest active slot (the
        orchestrator hands out the lowest free slot, so active slots stay packed at the bottom)."""
        idx = np.flatnonzero(self.active)
        need = int(idx[-1]) + 1 if idx.size else 1
        return next(b for b in self.batch_buckets if b >= need)

    def generate(self) -> np.ndarray:
        """One decode step → sampled tokens [slots] (valid for active slots, 0 elsewhere)."""
        return self._generate(self.batch_bucket(), self.attn_bucket())[0]

    def generate_with(self, job: PrefillJob, long: bool = False) -> tuple[np.ndarray, Optional[Prefix]]:
        """One decode step that also runs the next piece of the fused ``job`` in its matmuls →
        (tokens [slots] as generate(), the Prefix once the prompt is done, else None). The piece is
        ``interleave_chunk`` tokens, or ``interleave_long`` with ``long`` (the orchestrator's call
        when the prefill backlog is long) while at least that many prompt tokens remain. A last
        piece may reach back over positions already written (same K/V) or past the prompt (garbage
        that decoding overwrites before anything reads it)."""
        c = self.interleave_long if long and self.interleave_long and \
            job.length - job.done >= self.interleave_long else job.chunk
        off = min(job.done, self.max_model_len - c)
        job.done = off + c
        attn = max(self.attn_bucket(), next(a for a in self.attn_buckets if a >= job.done))
        out, hidden = self._generate(self.batch_bucket(), attn, (job.tokens[off:off + c].copy(),
                                                                 np.int32(job.slot), np.int32(off)))
        if job.done < job.length:
            return out, None
        logits = self._last_logits(self.params, hidden, np.int32(job.length - 1 - off))
        return out, self._prefix(job, logits, None)

    def _generate(self, b: int, attn_len: int, chunk=None) -> tuple[np.ndarray, Any]:
        """The step for slots [0, b) → (tokens [slots], the chunk rows' hidden [C, D] or None)."""
        # fresh arrays, never views of the state: XLA:CPU may read a numpy argument in place
        # while the step runs asynchronously, after the host has moved on
        pos = np.minimum(self.pos[:b], self.max_model_len - 1)     # a full slot is finished anyway
        hidden = None
        if chunk is None:
            logits, self.cache = self._decode(self.params, self.cache, self.tokens[:b].copy(), pos,
                                              attn_len)
        else:
            logits, hidden, self.cache = self._fused(self.params, self.cache, self.tokens[:b].copy(),
                                                     pos, *chunk, attn_len)
        toks = self._sample(logits, self.temperature[:b].copy(), self.top_p[:b].copy(),
                            self.keys[:b].copy(), self.step[:b].copy())
        out = np.zeros(self.slots, np.int32)
        out[:b] = np.asarray(toks)                                 # the one device→host copy
        a = self.active
        self.tokens = np.where(a, out, self.tokens).astype(np.int32)
        self.pos[a] += 1
        self.step[a] += 1
        return out, hidden

    def free(self, slot: int) -> None:
        self.active[slot] = False
        self.pos[slot] = 0
        self.temperature[slot] = 0.0
        self.top_p[slot] = 1.0
        self.step[slot] = 0

    # ---- helpers -----------------------------------------------------------------------------
    def is_eos(self, tok: int) -> bool:
        return tok in self.eos_ids

    def cache_tokens_used(self) -> int:
        return int(self.pos[self.active].sum())

    def kv_cache_bytes(self) -> int:
        return M.cache_bytes(self.args, self.slots, self.max_model_len, self.dtype)

    def warmup(self) -> float:
        """Compile (by running once) every prefill bucket, insert and decode bucket; returns seconds."""
        t0 = time.perf_counter()
        for b in self.prefill_buckets:
            log.info("compiling prefill bucket %d (%.0f s)", b, time.perf_counter() - t0)
            p = self.prefill([1] * min(b, self.max_model_len - 1))
            self.insert(p, 0)
            self.free(0)
        for b in self.prefill_buckets:                             # /v1/embeddings' programs
            if b <= (self.prefill_chunk or self.max_model_len) or b == self.prefill_buckets[-1]:
                log.info("compiling embedding bucket %d (%.0f s)", b, time.perf_counter() - t0)
                self.embed([1] * b)
        saved = self.pos.copy(), self.active.copy(), self.tokens.copy(), self.step.copy()
        self.active[:] = False                                     # nothing advances
        hidden = {}                                                # piece size -> [C, D]
        for b in self.batch_buckets:
            log.info("compiling decode batch %d, %d attention buckets (%.0f s)", b,
                     len(self.attn_buckets), time.perf_counter() - t0)
            for a in self.attn_buckets:
                self._generate(b, a)
                for c in (self.interleave_chunk, self.interleave_long):  # fused steps, slot 0 rows
                    if c and a >= c:
                        hidden[c] = self._generate(b, a, (np.zeros(c, np.int32), np.int32(0),
                                                          np.int32(0)))[1]
        for h in hidden.values():                                  # one compile per piece size
            self._last_logits(self.params, h, np.int32(0))
        if self.prefix is not None:                                # its copy programs, 2 in all
            self.prefix.warmup(self)
        self.pos, self.active, self.tokens, self.step = saved
        jax.block_until_ready(self.cache)
        self.compile_s = time.perf_counter() - t0
        return self.compile_s
