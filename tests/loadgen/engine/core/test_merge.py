"""loadgen.engine.core.merge: part files ─► one records.jsonl, every owed id exactly once."""
import json

from analysis.contract import RunRecord
from loadgen.record import Record, RecordWriter, read_records
from loadgen.engine.core.merge import Owed, line_end, line_id, merge


def ok(i, end, worker):
    return Record(id=i, phase="measured", scheduled_at_ns=end - 50, sent_at_ns=end - 40,
                  end_at_ns=end, chunks=[[end - 10, 1]], status="ok", worker=worker,
                  error='"end_at_ns":1, "id":99')      # free text cannot fool the line scan


def test_line_head_scan():
    line = (ok(12, 777, "0").to_json() + "\n").encode()
    assert line_id(line) == 12 and line_end(line) == 777
    assert line_id(b'{"phase":"x","id":3}\n') == 3 and line_id(b"garbage\n") is None


def test_parts_merge_in_end_order_and_unwritten_ids_are_cancelled(tmp_path):
    parts = [tmp_path / "records.0.jsonl", tmp_path / "records.1.jsonl"]
    with RecordWriter(parts[0]) as w:
        for i, end in ((0, 100), (2, 300), (4, 500)):
            w.write(ok(i, end, "0"))
    with RecordWriter(parts[1]) as w:
        for i, end in ((1, 200), (3, 250)):
            w.write(ok(i, end, "1"))
        w.write(ok(3, 260, "1"))                        # a duplicate: the first one stays
    with open(parts[1], "ab") as f:                     # killed mid-write: a torn last line
        f.write(ok(5, 600, "1").to_json()[:40].encode())
    owed = [[Owed(i, "measured", 1000 + i, 8, 16) for i in (0, 2, 4, 6)],
            [Owed(0, "warmup")] + [Owed(i, "measured", 1000 + i, 8, 16) for i in (1, 3, 5, 7)]]
    why = ["no record from client process 0", "client process 1 was killed by SIGKILL"]
    out = tmp_path / "records.jsonl"
    stats = merge(parts, owed, why, out, end_ns=9999)
    recs = read_records(out)
    assert sorted(r["id"] for r in recs) == list(range(8))          # exactly once each
    assert [r["id"] for r in recs[:5]] == [0, 1, 3, 2, 4]           # end time order
    lost = {r["id"]: r for r in recs if r["status"] == "cancelled"}
    assert set(lost) == {5, 6, 7}
    assert lost[5]["error"] == why[1] and lost[5]["worker"] == "1"
    assert lost[6]["error"] == why[0] and lost[6]["scheduled_at_ns"] == 1006
    assert lost[7]["requested_output_tokens"] == 8 and lost[7]["end_at_ns"] == 9999
    assert stats["records"] == 8 and stats["cancelled_by_process"] == [1, 2]
    assert stats["written_by_process"] == [3, 2] and stats["duplicates_dropped"] == 1
    for r in recs:
        RunRecord.read(r, "record")


def test_a_process_that_wrote_nothing(tmp_path):
    out = tmp_path / "records.jsonl"
    merge([tmp_path / "absent.jsonl"], [[Owed(0, "measured")]], ["died"], out, None)
    (r,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert r["id"] == 0 and r["status"] == "cancelled" and r["error"] == "died"


def test_a_journaled_request_keeps_what_the_journal_says(tmp_path):
    """The Locust workers' owed ids carry their send journal's fields and their own reason
    (the one merge for both engines): sent_at, session and turn kept; the Owed's why wins."""
    out = tmp_path / "records.jsonl"
    owed = [[Owed(4, "measured", 100, 5, 14, sent_at_ns=150, session_id="s0-1", turn=2,
                  why="worker 0 died mid-request"), Owed(6, "measured", 300)]]
    merge([tmp_path / "absent.jsonl"], owed, ["no record from worker 0"], out, 999)
    got = {r["id"]: r for r in read_records(out)}
    a, b = got[4], got[6]
    assert (a["sent_at_ns"], a["session_id"], a["turn"], a["error"]) == (
        150, "s0-1", 2, "worker 0 died mid-request")
    assert (a["requested_output_tokens"], a["workload_prompt_tokens"]) == (5, 14)
    assert b["sent_at_ns"] is None and b["error"] == "no record from worker 0"
    assert a["worker"] == b["worker"] == "0" and a["end_at_ns"] == 999
