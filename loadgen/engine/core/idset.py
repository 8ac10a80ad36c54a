"""The ids a sender has written a record for, in one bit each (issue 42: nothing kept per
finished request that grows like a Python set of ints, ~60 bytes an id).

    IdSet.add(id) / id in IdSet / len(IdSet)
        0 <= id < SPAN: one bit of a bytearray grown by doubling (1M ids: 128 kB)
        else (negative, or a sparse id far beyond): a small Python set beside it
The Ledger's ``written`` (each id written once; the remainder's cancelled records skip them).
Pure: no I/O.
"""
from __future__ import annotations

SPAN = 1 << 34              # ids below this live in the bitmap (at most 2 GiB: never reached)


class IdSet:
    """A set of request ids, one bit per id below the largest seen."""

    __slots__ = ("_bits", "_other", "_n")

    def __init__(self, ids=()):
        self._bits = bytearray(1 << 10)
        self._other: set[int] = set()
        self._n = 0
        for i in ids:
            self.add(i)

    def _grow(self, byte: int) -> None:
        size = len(self._bits)
        while size <= byte:
            size *= 2
        self._bits.extend(bytes(size - len(self._bits)))

    def add(self, i: int) -> None:
        if self._other and i in self._other:
            return
        if not 0 <= i < SPAN or (i >> 3) > 8 * len(self._bits) + (1 << 20):
            self._other.add(i)           # sparse far beyond the bitmap: not worth the gap
            self._n += 1
            return
        byte, bit = i >> 3, 1 << (i & 7)
        if byte >= len(self._bits):
            self._grow(byte)
        b = self._bits[byte]
        if not b & bit:
            self._bits[byte] = b | bit
            self._n += 1

    def __contains__(self, i) -> bool:
        if isinstance(i, int) and 0 <= i < SPAN:
            byte = i >> 3
            if byte < len(self._bits) and self._bits[byte] & (1 << (i & 7)):
                return True
        return i in self._other

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        bits = self._bits
        for byte, b in enumerate(bits):
            if b:
                for k in range(8):
                    if b & (1 << k):
                        yield (byte << 3) | k
        yield from sorted(self._other)
