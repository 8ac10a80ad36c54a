"""Automatic prefix caching, the device half: a pool of cached K/V blocks and its two copy programs.

    admission  Engine.start_prefill(ids, home=slot) ─► lookup: PrefixCache.match (prefix_cache.py)
               ─► hit of m blocks: load pool blocks ─► slot rows [0, m·block) ─► the rest of the
               prompt is a fused job from m·block (engine.generate_with pieces)
    prefilled  Engine.insert(prefix, slot) ─► store: the prompt's full blocks not cached yet,
               slot rows ─► pool (LRU evicts when the pool is full)

Pool, per layer (the slot cache's layouts, one block per row; row ``n_blocks`` is a trash row
that padded copy entries write to):

    k [n_blocks + 1, Hkv, Dh, block]        v [n_blocks + 1, Hkv, block, Dh]

Shapes: both copy programs move a fixed ``COPY`` blocks per call (index vectors padded), so each
compiles ONCE whatever the prompt or hit length (a 200-token hit = ceil(12 / 8) = 2 load calls of
8 blocks of 16); nothing else is compiled for a hit, since its remaining prompt runs in the fused
decode-step pieces that ``Engine.warmup`` already compiled for every (batch, attention) bucket.
The slot cache is donated to the load, the pool to the store (updated in place; scatters, which
XLA:CPU keeps in place, see model.decode).

Default pool: as many blocks as the slot cache holds (slots · max_model_len / block), i.e. the
same bytes again (reported on GET /info as ``prefix_cache``).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import model as M
from .prefix_cache import PrefixCache
from .presets import ModelArgs

COPY = 8                      # blocks per copy call (padded): one compiled program each way


class PrefixStore:
    def __init__(self, args: ModelArgs, dtype: str, slots: int, max_len: int, block: int = 16,
                 n_blocks: Optional[int] = None) -> None:
        if block < 1 or block >= max_len:
            raise ValueError(f"prefix block must be in [1, max_model_len), got {block}")
        n = int(n_blocks) if n_blocks is not None else max(1, slots * max_len // block)
        if n < 1:
            raise ValueError(f"prefix cache blocks must be >= 1, got {n}")
        self.block, self.n_blocks = int(block), n
        self.index = PrefixCache(n, self.block)
        dt = M.DTYPES[dtype]
        a = args
        self.pool = tuple((jnp.zeros((n + 1, a.n_kv_heads, a.head_dim, block), dt),
                           jnp.zeros((n + 1, a.n_kv_heads, block, a.head_dim), dt))
                          for _ in range(a.n_layers))
        self.bytes = 2 * a.n_layers * (n + 1) * a.n_kv_heads * a.head_dim * block * \
            (4 if dtype == "fp32" else 2)
        self._load = jax.jit(self._load_fn, donate_argnums=(0,))
        self._save = jax.jit(self._save_fn, donate_argnums=(0,))

    # ---- jitted bodies: src/dst [COPY] int32 ---------------------------------------------------
    def _positions(self, blocks):
        return blocks[:, None] * self.block + jnp.arange(self.block)          # [COPY, block]

    def _load_fn(self, cache, pool, slot, src, dst):
        """pool rows src ─► cache slot ``slot`` at block positions dst (padding repeats an entry:
        the same values written twice)."""
        pos = self._positions(dst)
        out = []
        for (kc, vc), (kp, vp) in zip(cache, pool):
            # kc.at[slot, :, :, pos]: advanced dims first → update [COPY, block, Hkv, Dh]
            kc = kc.at[slot, :, :, pos].set(kp[src].transpose(0, 3, 1, 2))
            vc = vc.at[slot, :, pos, :].set(vp[src].transpose(0, 2, 1, 3))
            out.append((kc, vc))
        return tuple(out)

    def _save_fn(self, pool, cache, slot, src, dst):
        """cache slot ``slot`` at block positions src ─► pool rows dst (padding: the trash row)."""
        pos = self._positions(src)
        out = []
        for (kp, vp), (kc, vc) in zip(pool, cache):
            k = kc[slot, :, :, pos]                                # [COPY, block, Hkv, Dh]
            v = vc[slot, :, pos, :]                                # [COPY, block, Hkv, Dh]
            out.append((kp.at[dst].set(k.transpose(0, 2, 3, 1)),   # [COPY, Hkv, Dh, block]
                        vp.at[dst].set(v.transpose(0, 2, 1, 3))))  # [COPY, Hkv, block, Dh]
        return tuple(out)

    # ---- host side -----------------------------------------------------------------------------
    def lookup(self, ids: Sequence[int], slot: int, engine: Any) -> tuple[list, int]:
        """(the prompt's block hashes, cached tokens); on a hit the blocks are in slot's rows."""
        hashes, found = self.index.match(ids)
        for i in range(0, len(found), COPY):
            part = list(range(i, min(i + COPY, len(found))))
            src = [found[j] for j in part]
            src, dst = _pad(src, src[0]), _pad(part, part[0])
            engine.cache = self._load(engine.cache, self.pool, np.int32(slot), src, dst)
        return hashes, len(found) * self.block

    def store(self, hashes: Sequence[bytes], slot: int, engine: Any) -> int:
        """Copy the prompt's full blocks not cached yet from slot's rows into the pool; returns
        how many were copied."""
        todo = self.index.store(hashes, 0)
        for i in range(0, len(todo), COPY):
            part = todo[i:i + COPY]
            src = _pad([b for b, _ in part], 0)
            dst = _pad([p for _, p in part], self.n_blocks)           # padding → trash row
            self.pool = self._save(self.pool, engine.cache, np.int32(slot), src, dst)
        return len(todo)

    def reset(self) -> int:
        return self.index.reset()

    def warmup(self, engine: Any) -> None:
        """Compile both copy programs (slot 0's rows and the trash row: nothing real changes)."""
        trash = _pad([], self.n_blocks)
        self.pool = self._save(self.pool, engine.cache, np.int32(0), _pad([], 0), trash)
        engine.cache = self._load(engine.cache, self.pool, np.int32(0), trash, _pad([], 0))

    def describe(self) -> dict:
        return {"block": self.block, "blocks": self.n_blocks, "bytes": self.bytes,
                "copy_blocks_per_call": COPY}


def _pad(xs: list[int], fill: int) -> np.ndarray:
    out = np.full(COPY, fill, np.int32)
    out[:len(xs)] = xs
    return out
