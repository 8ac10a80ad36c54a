"""IdSet: the ledger's written ids, one bit each (issue 42: flat memory over a long run)."""
import sys

from loadgen.engine.core.idset import IdSet
from loadgen.engine.core.ledger import Ledger


def test_a_set_of_ids():
    s = IdSet([3, 0, 3, 9000])
    assert 3 in s and 0 in s and 9000 in s and 1 not in s and 9001 not in s
    assert len(s) == 3 and list(s) == [0, 3, 9000]
    s.add(-1)
    s.add(1 << 40)                       # far beyond the bitmap: kept aside, not a gap
    s.add(1 << 40)
    assert -1 in s and (1 << 40) in s and len(s) == 5
    assert "x" not in s and None not in s


def test_a_sparse_id_then_the_bitmap_reaches_it_counts_once():
    s = IdSet()
    far = 80_000_000
    s.add(far)                            # aside (too far for the bitmap then)
    for i in range(0, far, far // 8):
        s.add(i)
    s._grow(far >> 3)                     # the bitmap covers it now
    s.add(far)
    assert len(s) == 9 and far in s


def test_ids_take_a_bit_each():
    s = IdSet(range(0, 100_000, 7))
    s.add(999_999)
    assert len(s) == 14_287 and 999_999 in s and 999_998 not in s and 7 in s and 8 not in s
    assert sys.getsizeof(s._bits) < 300_000          # 1M ids; a set of ints: ~60 MB


class _W:
    def __init__(self):
        self.n = 0

    def write(self, rec):
        self.n += 1


def test_the_ledger_writes_each_id_once_through_it():
    from loadgen.client.attempt import cancelled_record
    led = Ledger(_W())
    rec = cancelled_record(7, "measured", None, None, "x")
    assert led.write(rec) and not led.write(rec)
    assert isinstance(led.written, IdSet) and 7 in led.written and led.writer.n == 1
