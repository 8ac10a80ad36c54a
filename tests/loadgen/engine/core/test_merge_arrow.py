"""loadgen.engine.core.merge_arrow: records.arrow parts ─► one records.arrow by merge.py's rules,
batch by batch: exported, it is the JSONL merge's records.jsonl byte for byte (end time order,
each id once, a killed part's flushed batches, the owed ids cancelled, JSONL parts too)."""
import pytest

from analysis.contract.columnar import ColumnarWriter
from analysis.contract.columnar_io import export_jsonl
from analysis.contract.columnar_parts import Joiner, Tail, part_rows
from loadgen.engine.core import merge_arrow
from loadgen.engine.core.merge import Owed, merge
from loadgen.record import Record, RecordWriter
from loadgen.redact import redact

# (id, end, worker) per part; a duplicate id 3 in part 1 (the first one stays); part 2: nothing
PARTS = [[(0, 100, "0"), (2, 300, "0"), (4, 500, "0"), (8, None, "0"), (10, 700, "0")],
         [(1, 200, "1"), (3, 250, "1"), (3, 260, "1"), (9, 650, "1")],
         []]
OWED = [[Owed(i, "measured", 1000 + i, 8, 16) for i in (0, 2, 4, 6, 8, 10)],
        [Owed(0, "warmup")] + [Owed(i, "measured", 1000 + i, 8, 16) for i in (1, 3, 5, 7, 9)],
        [Owed(11, "measured", 1011, 8, 16, sent_at_ns=1500, session_id="s1", turn=1,
              why="worker 2 died mid-request")]]
WHY = ["no record from client process 0", "client process 1 was killed by SIGKILL", "dead"]


def ok(i, end, worker):
    return Record(id=i, phase="measured", scheduled_at_ns=(end or 0) - 50, sent_at_ns=5,
                  end_at_ns=end, chunks=[[(end or 0) - 10, 1], [(end or 0) - 5, 2]],
                  status="ok" if end else "error", worker=worker, error=None if end else "x")


def write_parts(tmp_path, arrow_of=(0, 1, 2), batch=2):
    """The parts as JSONL (for merge.merge) and as records.K.arrow / .jsonl (merge_arrow)."""
    jsonl, mixed = [], []
    for k, rows in enumerate(PARTS):
        j = tmp_path / f"j{k}.jsonl"
        with RecordWriter(j) as w:
            for r in rows:
                w.write(ok(*r))
        jsonl.append(j)
        stem = tmp_path / f"records.{k}"
        if k in arrow_of:
            with ColumnarWriter(tmp_path / f"records.{k}.arrow", clean=redact, batch=batch,
                                flush_s=1e9) as w:
                w.write_many(ok(*r) for r in rows)
        else:
            (tmp_path / f"records.{k}.jsonl").write_bytes(j.read_bytes())
        mixed.append(merge_arrow.part_of(stem))
    return jsonl, mixed


@pytest.mark.parametrize("arrow_of", [(0, 1, 2), (1,)])
def test_the_arrow_merge_is_the_jsonl_merge(tmp_path, arrow_of):
    jsonl, parts = write_parts(tmp_path, arrow_of)
    want = merge(jsonl, OWED, WHY, tmp_path / "want.jsonl", end_ns=9999)
    got = merge_arrow.merge(parts, OWED, WHY, tmp_path / "records.arrow", end_ns=9999)
    assert got == want and got["duplicates_dropped"] == 1 and got["records"] == 12
    export_jsonl(tmp_path / "records.arrow", tmp_path / "got.jsonl")
    assert (tmp_path / "got.jsonl").read_bytes() == (tmp_path / "want.jsonl").read_bytes()


def test_a_killed_part_keeps_its_flushed_batches(tmp_path):
    jsonl, parts = write_parts(tmp_path, batch=2)
    data = parts[0].read_bytes()
    parts[0].write_bytes(data[:len(data) - 200])     # its last batch torn, no end mark
    kept = [r[3] for r in part_rows(parts[0], 0)]
    assert kept == [0, 2, 4, 8]
    got = merge_arrow.merge(parts, OWED, WHY, tmp_path / "records.arrow", end_ns=9999)
    export_jsonl(tmp_path / "records.arrow", tmp_path / "got.jsonl")
    lines = (tmp_path / "got.jsonl").read_text().splitlines()
    assert len(lines) == 12 and got["cancelled_by_process"] == [2, 2, 1]
    assert all('"status":"cancelled"' in x for x in lines[-5:]) and '"id":10,' in lines[-4]


def test_the_joiner_writes_whole_batches_in_order(tmp_path):
    _, parts = write_parts(tmp_path, batch=3)
    rows = list(part_rows(parts[0], 0)) + list(part_rows(parts[1], 1))
    with Joiner(tmp_path / "out.arrow", batch=4) as j:
        for r in rows[:3]:
            j.row(r[4], r[5])
        j.records([ok(50, 5000, "9")], redact)
        for r in rows[3:]:
            j.row(r[4], r[5])
    got = [r[3] for r in part_rows(tmp_path / "out.arrow", 0)]
    assert got == [0, 2, 4, 50, 8, 10, 1, 3, 3, 9] and j.count == 10


def test_the_tail_reads_each_new_batch_once(tmp_path):
    p = tmp_path / "records.0.arrow"
    t = Tail(p)
    assert t.poll() == []                               # not there yet
    w = ColumnarWriter(p, batch=2, flush_s=1e9)
    assert t.poll() == []
    w.write_many([ok(0, 100, "0"), ok(1, 200, "0"), ok(2, 300, "0")])
    assert [b.num_rows for b in t.poll()] == [2]
    with open(p, "ab") as f:                            # half a message: waits
        pass
    assert t.poll() == []
    w.close()
    assert [b.column("id").to_pylist() for b in t.poll()] == [[2]]
    assert t.poll() == []


def test_the_tail_reads_a_replaced_file_from_its_start(tmp_path):
    import json
    from analysis.contract.columnar_parts import rows
    p = tmp_path / "records.arrow"
    with ColumnarWriter(p, batch=2, flush_s=1e9) as w:
        w.write_many([ok(0, 100, "0"), ok(1, 200, "0"), ok(2, 300, "0")])
    t = Tail(p)
    assert sum(b.num_rows for b in t.poll()) == 3
    with ColumnarWriter(tmp_path / "new.arrow", batch=5, flush_s=1e9) as w:
        w.write_many([ok(i, 100 * i + 100, "1") for i in range(4)])
    (tmp_path / "new.arrow").replace(p)                 # another inode: read from its start
    got = [r for b in t.poll() for r in rows(b)]
    assert [r["id"] for r in got] == [0, 1, 2, 3]
    assert got[1] == json.loads(ok(1, 200, "1").to_json())      # the JSON line's dict
