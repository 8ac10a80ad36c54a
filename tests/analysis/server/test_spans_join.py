"""analysis.server.spans_join: timings ─► records.jsonl by trace id, in one rewrite; unknown
trace ids counted, lines without a match untouched byte for byte."""
import json

from analysis.contract.record import Record
from analysis.server.spans_join import join_file

T = {"queue_ms": 1.0, "prefill_ms": 2.0, "decode_ms": None, "server_ttft_ms": 4.0,
     "server_e2e_ms": 9.0, "scheduler_ms": None}


def write(path, recs):
    path.write_text("".join(r.to_json() + "\n" for r in recs))


def test_matched_records_get_server_timing_the_rest_unchanged(tmp_path):
    p = tmp_path / "records.jsonl"
    recs = [Record(id=i, phase="measured", trace_id=f"{i:032x}") for i in range(3)]
    recs.append(Record(id=3, phase="measured"))                 # no trace id (switch off)
    write(p, recs)
    before = p.read_text().splitlines()
    stats = join_file(p, {f"{1:032x}": T, "f" * 32: T}, "otlp")
    assert stats == {"records_with_trace_id": 3, "joined": 1, "spans": 2, "unmatched_spans": 1}
    after = p.read_text().splitlines()
    assert after[0] == before[0] and after[2] == before[2] and after[3] == before[3]
    got = json.loads(after[1])
    assert got["server_timing"] == {**T, "source": "otlp"}
    assert Record.read(got).server_timing.queue_ms == 1.0
    assert list(tmp_path.iterdir()) == [p]                      # no temp file left


def test_a_line_of_another_writer_goes_through_the_record(tmp_path):
    p = tmp_path / "records.jsonl"
    d = {"id": 0, "phase": "measured", "trace_id": "a" * 32, "status": "ok"}   # keys reordered
    p.write_text(json.dumps(d) + "\nnot json\n")
    stats = join_file(p, {"a" * 32: T})
    lines = p.read_text().splitlines()
    assert json.loads(lines[0])["server_timing"]["server_ttft_ms"] == 4.0
    assert lines[1] == "not json" and stats["joined"] == 1


def test_no_spans_no_rewrite(tmp_path):
    p = tmp_path / "records.jsonl"
    write(p, [Record(id=0, phase="measured", trace_id="a" * 32)])
    m = p.stat().st_mtime_ns
    assert join_file(p, {})["joined"] == 0 and p.stat().st_mtime_ns == m
    assert join_file(p, {"b" * 32: T})["unmatched_spans"] == 1


def test_records_arrow_is_joined_batch_by_batch_as_records_jsonl_is(tmp_path):
    """output.records: arrow (issue 42): the join rewrites records.arrow a batch at a time;
    exported, it is the joined records.jsonl byte for byte; nothing matched: untouched."""
    from analysis.contract.columnar import ColumnarWriter
    from analysis.contract.columnar_io import export_jsonl
    recs = [Record(id=i, phase="measured", trace_id=None if i % 4 == 3 else f"{i:032x}",
                   chunks=[[i, 1]]) for i in range(10)]
    j, a = tmp_path / "records.jsonl", tmp_path / "run" / "records.arrow"
    a.parent.mkdir()
    write(j, recs)
    with ColumnarWriter(a, batch=3, flush_s=1e9) as w:
        w.write_many(recs)
    m = a.stat().st_mtime_ns
    assert join_file(a, {"f" * 32: T})["unmatched_spans"] == 1 and a.stat().st_mtime_ns == m
    spans = {f"{i:032x}": {**T, "queue_ms": float(i)} for i in (1, 2, 5)} | {"f" * 32: T}
    want = join_file(j, spans, "otlp")
    got = join_file(a, spans, "otlp")
    assert got == want == {"records_with_trace_id": 8, "joined": 3, "spans": 4,
                           "unmatched_spans": 1}
    export_jsonl(a, tmp_path / "got.jsonl")
    assert (tmp_path / "got.jsonl").read_bytes() == j.read_bytes()
    assert sorted(p.name for p in a.parent.iterdir()) == ["records.arrow"]   # no temp left
