"""analysis.contract.timing.token_reads a block of chunks at a time: the same count as over the
whole arrays, for every block size, selections and out-of-order stamps included."""
import numpy as np

from analysis.contract import timing


class Tab:
    def __init__(self, t, n, offsets):
        self.t, self.n, self.offsets = t, n, offsets

    def record_of_chunk(self):
        return np.repeat(np.arange(len(self.offsets) - 1, dtype=np.int32), np.diff(self.offsets))

    def __len__(self):
        return len(self.offsets) - 1


class Sub:
    def __init__(self, parent, mask):
        self.parent, self._mask = parent, mask

    def mask(self):
        return self._mask


def whole(tab, sel=None) -> int:
    """Distinct (record, stamp) pairs among token chunks, counted by hand."""
    owner = tab.record_of_chunk()
    pairs = {(int(o), int(t)) for o, t, n in zip(owner, tab.t, tab.n)
             if n != 0 and (sel is None or sel[o])}
    return len(pairs)


def test_token_reads_by_blocks_count_every_distinct_read(monkeypatch):
    rng = np.random.default_rng(5)
    for block in (1, 2, 3, 7, 1 << 20):
        monkeypatch.setattr(timing, "BLOCK", block)
        for _ in range(60):
            k = int(rng.integers(0, 12))
            counts = rng.integers(0, 5, k)
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            m = int(offsets[-1])
            t = rng.integers(0, 6, m)
            if rng.random() < 0.7:                       # in order within each record
                t = np.sort(t)
            tab = Tab(t.astype(np.int64), rng.integers(0, 3, m), offsets)
            assert timing.token_reads(tab) == whole(tab)
            sel = rng.random(k) < 0.5
            assert timing.token_reads(Sub(tab, sel)) == whole(tab, sel)
