"""Automatic prefix caching, the bookkeeping half (pure Python, no JAX): vLLM's block hashing.

    prompt ids ─► full blocks of ``block`` tokens ─► hash chain h_i = H(h_{i-1}, tokens of block i)
    match(ids)  ─► the longest run of leading blocks whose hashes are cached ─► their pool indices
                   (at most (len(ids) - 1) // block blocks: the last prompt token is always
                   computed, its logits give the first output token — as vLLM does)
    store(hashes, have) ─► pool indices for the blocks not cached yet (free ones first, then the
                   least recently used block is evicted) ─► the engine copies those K/V blocks

A block's hash covers every token before it (the chain), so equal hashes mean an equal prefix and
equal K/V (one model per server, positions fixed by the block index). H is BLAKE2b-128 over the
parent digest and the block's int32 bytes (vLLM's default is SHA-256; a 64-bit builtin hash
collides too easily for a cache that must never serve another prompt's K/V).

LRU: every block matched or stored becomes most recently used, the chain touched tail first, so
of one chain the tail blocks are evicted first (vLLM frees a request's blocks in reverse order for
the same reason). A block whose parent was evicted stays until it is evicted itself; it can no
longer be reached, since ``match`` walks from the first block.

Counters, in tokens as vLLM's ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``:
``queries`` += prompt tokens of every lookup, ``hits`` += the cached tokens it found.

The engine (servers/jax/engine.py) owns the K/V pool this indexes; everything here runs on the
engine thread only (no locks).
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Sequence

import numpy as np

__all__ = ["PrefixCache", "block_hashes"]


def block_hashes(ids: Sequence[int], block: int) -> list[bytes]:
    """The hash chain of the full blocks of ``ids`` (a partial last block has none)."""
    arr = np.asarray(ids, dtype=np.int32)
    out: list[bytes] = []
    parent = b""
    for i in range(len(arr) // block):
        h = hashlib.blake2b(parent, digest_size=16)
        h.update(arr[i * block:(i + 1) * block].tobytes())
        parent = h.digest()
        out.append(parent)
    return out


class PrefixCache:
    """Hash → pool index for ``n_blocks`` cached blocks of ``block`` tokens, LRU-bounded."""

    def __init__(self, n_blocks: int, block: int) -> None:
        if n_blocks < 1 or block < 1:
            raise ValueError(f"prefix cache needs n_blocks >= 1 and block >= 1, got {n_blocks}, {block}")
        self.n_blocks, self.block = int(n_blocks), int(block)
        self._lru: OrderedDict[bytes, int] = OrderedDict()    # oldest first
        self._free: list[int] = list(range(self.n_blocks - 1, -1, -1))  # pop() gives 0 first
        self.queries = 0
        self.hits = 0

    def __len__(self) -> int:
        return len(self._lru)

    def match(self, ids: Sequence[int]) -> tuple[list[bytes], list[int]]:
        """(the prompt's block hashes, pool indices of its longest cached block prefix); counts
        the lookup (queries += len(ids), hits += cached tokens)."""
        hashes = block_hashes(ids, self.block)
        usable = (len(ids) - 1) // self.block
        found: list[int] = []
        for h in hashes[:usable]:
            idx = self._lru.get(h)
            if idx is None:
                break
            found.append(idx)
        self._touch(hashes[:len(found)])
        self.queries += len(ids)
        self.hits += len(found) * self.block
        return hashes, found

    def store(self, hashes: Sequence[bytes], have: int) -> list[tuple[int, int]]:
        """Make blocks ``have``.. of ``hashes`` cached → [(block number, pool index)] for the ones
        whose K/V the engine must copy in (blocks already cached, e.g. stored meanwhile by another
        request with the same prefix, are only touched). Never evicts a block of this chain."""
        todo: list[tuple[int, int]] = []
        chain = set(hashes)
        for i in range(have, len(hashes)):
            h = hashes[i]
            if h in self._lru:
                continue
            idx = self._take(chain)
            if idx is None:                     # every block belongs to this chain: stop here
                break
            self._lru[h] = idx
            todo.append((i, idx))
        self._touch(list(hashes))
        return todo

    def reset(self) -> int:
        """Forget every block (POST /reset_prefix_cache); returns how many were cached."""
        n = len(self._lru)
        self._lru.clear()
        self._free = list(range(self.n_blocks - 1, -1, -1))
        return n

    def _take(self, keep: set) -> int | None:
        if self._free:
            return self._free.pop()
        for h in self._lru:                     # oldest first
            if h not in keep:
                return self._lru.pop(h)
        return None

    def _touch(self, chain: Sequence[bytes]) -> None:
        for h in reversed(chain):               # tail first: the chain's head ends most recent
            if h in self._lru:
                self._lru.move_to_end(h)
