"""loadgen/live/follow.py: records read as files grow, each id once, whatever the writers do."""
import json

from loadgen.live.follow import RecordFollower


def line(i, **kw):
    return json.dumps({"id": i, "status": "ok", **kw}) + "\n"


def ids(recs):
    return [r["id"] for r in recs]


def test_a_growing_file_with_a_torn_last_line(tmp_path):
    f = RecordFollower(tmp_path)
    assert f.poll() == []                               # no records.jsonl yet
    path = tmp_path / "records.jsonl"
    path.write_text(line(0) + line(1) + '{"id": 2, "sta')
    assert ids(f.poll()) == [0, 1]
    with open(path, "a") as out:
        out.write('tus": "ok"}\n' + "not json\n" + "[1, 2]\n" + line(3))
    assert ids(f.poll()) == [2, 3]
    assert f.skipped == 2 and f.records == 4
    assert f.poll() == [] and not f.moved


def test_sender_parts_then_the_merged_file_count_each_id_once(tmp_path):
    """client.processes > 1: procs/records.K.jsonl during the run, records.jsonl at the end
    (the parts' records again plus 'cancelled' lines for ids never written), parts deleted."""
    procs = tmp_path / "procs"
    procs.mkdir()
    (tmp_path / "records.jsonl").write_text("")
    (procs / "records.0.jsonl").write_text(line(0) + line(2))
    (procs / "records.1.jsonl").write_text(line(1))
    f = RecordFollower(tmp_path)
    assert sorted(ids(f.poll())) == [0, 1, 2]
    with open(procs / "records.1.jsonl", "a") as out:
        out.write(line(3))
    (procs / "records.0.jsonl").unlink()
    assert ids(f.poll()) == [3]
    (procs / "records.1.jsonl").unlink()
    (tmp_path / "records.jsonl").write_text(
        "".join(line(i) for i in range(4)) + line(4, status="cancelled"))
    got = f.poll()
    assert ids(got) == [4] and got[0]["status"] == "cancelled"
    assert f.records == 5 and list(f.tails) == [tmp_path / "records.jsonl"]


def test_a_replaced_or_cut_file_is_read_again_without_double_counts(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(line(0) + line(1))
    f = RecordFollower(tmp_path)
    assert ids(f.poll()) == [0, 1]
    new = tmp_path / "new.jsonl"
    new.write_text(line(0) + line(1) + line(2))
    new.replace(path)                                   # another inode at the same path
    assert ids(f.poll()) == [2]
    path.write_text(line(5))                            # shorter than what was read: from 0
    assert ids(f.poll()) == [5]


def test_a_backlog_is_read_in_bounded_polls(tmp_path, monkeypatch):
    import loadgen.live.follow as follow
    monkeypatch.setattr(follow, "MAX_READ", 64)
    (tmp_path / "records.jsonl").write_text("".join(line(i) for i in range(20)))
    f = RecordFollower(tmp_path)
    got = []
    for _ in range(100):
        got += f.poll()
        if not f.moved:
            break
    assert ids(got) == list(range(20))


def test_records_arrow_parts_then_the_merged_store_count_each_id_once(tmp_path):
    """output.records: arrow (issue 42): procs/records.K.arrow followed a batch at a time while
    written, then the merged records.arrow: each id once, rows as their JSON lines' dicts."""
    from analysis.contract.columnar import ColumnarWriter
    from analysis.contract.record import Record

    def rec(i):
        return Record(id=i, phase="measured", end_at_ns=100 + i, chunks=[[90 + i, 1]],
                      status="ok")
    procs = tmp_path / "procs"
    procs.mkdir()
    w0 = ColumnarWriter(procs / "records.0.arrow", batch=2, flush_s=1e9)
    f = RecordFollower(tmp_path)
    w0.write_many([rec(0), rec(2), rec(4)])               # one batch of 2 flushed, 1 waiting
    got = f.poll()
    assert ids(got) == [0, 2] and got[0] == json.loads(rec(0).to_json()) and f.moved
    w0.close()
    assert ids(f.poll()) == [4]
    with ColumnarWriter(tmp_path / "records.arrow") as w:
        w.write_many([rec(i) for i in range(6)])
    (procs / "records.0.arrow").unlink()
    assert sorted(ids(f.poll())) == [1, 3, 5] and f.records == 6
    assert f.poll() == [] and not f.moved
