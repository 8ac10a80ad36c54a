"""Static shape buckets: every jitted program is compiled for a few sizes, chosen here.

    buckets(16, 512)            16, 32, 64, 128, 256, 512        decode batch (from 1), prefill base
    attn_buckets(64, 512)       64, 128, 192, 256, 384, 512      decode attention length
    attn_buckets(16, 512, 64)   16, 32, 64, 96, 128, 192, …      prefill length (1.5x from 64 on)

A request is padded up to the smallest bucket that holds it, so more buckets cost compile time at
start-up (``Engine.warmup``) and save work per step.
"""
from __future__ import annotations


def buckets(lo: int, hi: int) -> list[int]:
    """Powers of two from lo up to (and always ending at) hi."""
    out, b = [], lo
    while b < hi:
        out.append(b)
        b *= 2
    return out + [hi]


def attn_buckets(lo: int, hi: int, from_: int = 128) -> list[int]:
    """Powers of two from lo, plus the 1.5x step between two of them from ``from_`` on (…, 128,
    192, 256, 384, …), ending at hi: decode attention reads at most 1.5x the positions it needs
    above 128 (measured: at 32 slots, reading 256 positions instead of 128 cost ~9 ms of a ~50 ms
    step). Prefill uses the same steps from 64 on (a 65-token prompt runs 96 positions, not 128)."""
    out = []
    for b in buckets(lo, hi):
        half = b // 2
        if half >= from_ and out and out[-1] < half + half // 2 < b:
            out.append(half + half // 2)
        out.append(b)
    return out
