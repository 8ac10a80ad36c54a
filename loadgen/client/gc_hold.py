"""The client's garbage-collector rule while it stamps chunks, shared by both engines.

    hold_gc() ─► gc.freeze() + gen-0 threshold GC_GEN0 ─► (stamping) ─► release_gc(saved)

Per chunk the client allocates a few containers that refcounting frees at once; the default gen-0
threshold (700) would still run a collection every few requests and walk the records kept so far.
Standard library only: the gevent world (loadgen.engine.locust) imports it without asyncio.
"""
from __future__ import annotations

import gc

GC_GEN0 = 50_000              # while the client stamps: collect young objects this rarely


def hold_gc() -> tuple:
    """Freeze what exists, collect young objects rarely; the thresholds to give back."""
    saved = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(saved[0], GC_GEN0), *saved[1:])
    return saved


def release_gc(saved: tuple) -> None:
    gc.set_threshold(*saved)
    gc.unfreeze()
