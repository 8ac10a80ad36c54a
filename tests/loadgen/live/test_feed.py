"""loadgen/live/feed.py: the progress counters copied into the shared file the exporter reads."""
import time

from loadgen.live.feed import Mirror, in_flight, open_counters
from loadgen.console.progress import RunProgress
from loadgen.engine.core.counters import OK, SENT, TOKENS


class Spec:
    def __init__(self, i):
        self.id = i


class Rec:
    def __init__(self, i, status="ok", output_tokens=3):
        self.id, self.status, self.output_tokens = i, status, output_tokens


def test_the_mirror_copies_the_progress_counters_and_in_flight_reads_them():
    p = RunProgress(None, enabled=False)
    m = Mirror(period_s=0.01)
    try:
        m.point(p)
        reader = open_counters(str(m.path))
        assert reader is not None and in_flight(reader) == 0
        for i in range(3):
            p.on_send(Spec(i))
        p.on_done(Rec(0))
        deadline = time.monotonic() + 30                  # the timer's next copy: bounded
        while in_flight(reader) != 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert in_flight(reader) == 2
        assert (reader[SENT], reader[OK], reader[TOKENS]) == (3, 1, 3)
        p.on_done(Rec(1, "error", 0))
        p.on_done(Rec(2, "cancelled", 0))
    finally:
        m.close()                                         # a last copy, then the file goes
    assert in_flight(reader) == 0 and reader[SENT] == 3
    assert not m.dir.exists()
    m.close()                                             # twice: harmless
    reader.close()


def test_an_unreadable_feed_is_none(tmp_path):
    assert open_counters(str(tmp_path / "absent.bin")) is None
