"""records.arrow (analysis.contract.columnar): the same records as records.jsonl in ~50 bytes a
4-token record; whole batches only after a kill or a torn write; read by two at once; a record
of 100,000 chunks; validate_run_dir and open_run over it."""
import json
import os
import signal
import threading

import numpy as np

from analysis.contract import columnar
from analysis.contract.columnar import ColumnarWriter
from analysis.contract.columnar_io import export_jsonl, from_jsonl, read_table_arrow
from analysis.contract.record import Record, ServerTiming
from analysis.contract.records import read_table, records_of
from analysis.contract.rundir import validate_run_dir


def rec(i: int, tokens: int = 4, **kw) -> Record:
    t = 1_000_000 + 100_000 * i
    ch = [[t + 10, 0]] + [[t + 20 + k, 1] for k in range(tokens)] + [[t + 99, 0]]
    return Record(**{**dict(id=i, phase="measured", scheduled_at_ns=t, sent_at_ns=t,
                            first_chunk_at_ns=ch[0][0], first_token_at_ns=ch[1][0],
                            end_at_ns=ch[-1][0], chunks=ch, status="ok", http_status=200,
                            prompt_tokens=8, output_tokens=tokens, chunk_output_tokens=tokens,
                            finish_reason="length"), **kw})


def same(a: Record, b: Record) -> bool:
    return {**a.as_dict(), "chunks": [list(c) for c in a.chunks]} == \
        {**b.as_dict(), "chunks": [list(c) for c in b.chunks]}


def test_the_same_records_as_written_and_small(tmp_path):
    recs = [rec(i) for i in range(300)]
    recs[3] = rec(3, status="error", error_kind="http", error="bad key sk-SECRET here",
                  server_timing=ServerTiming(queue_ms=1.5),
                  attempt_log=[(429, 5, 6, "rate_limited"), (200, 7, None, None)])
    recs[4] = rec(4, tokens=0)
    with ColumnarWriter(tmp_path / "records.arrow", clean=lambda s: s.replace("SECRET", "***"),
                        batch=128, flush_s=1e9) as w:
        w.write_many(recs)
    t = read_table_arrow(tmp_path / "records.arrow")
    assert len(t) == 300 and w.count == 300
    assert "***" in t.records[3].error
    assert b"SECRET" not in (tmp_path / "records.arrow").read_bytes()
    recs[3].error = recs[3].error.replace("SECRET", "***")
    assert all(same(a, b) for a, b in zip(recs, t.records))
    assert t.records[3].server_timing == ServerTiming(queue_ms=1.5)
    assert t.offsets[-1] == len(t.t) == sum(len(r.chunks) for r in recs)
    # the JSON reader of the export reads the very same table
    assert export_jsonl(tmp_path / "records.arrow", tmp_path / "records.jsonl") == 300
    j = read_table(tmp_path / "records.jsonl")
    assert np.array_equal(j.t, t.t) and np.array_equal(j.offsets, t.offsets)
    assert all(same(a, b) for a, b in zip(j.records, t.records))
    assert from_jsonl(tmp_path / "records.jsonl", tmp_path / "again.arrow") == 300
    assert all(same(a, b) for a, b in zip(read_table_arrow(tmp_path / "again.arrow").records,
                                          t.records))
    (tmp_path / "records.jsonl").unlink()
    assert len(records_of(tmp_path)) == 300                    # the run's store, found
    big = (tmp_path / "records.arrow").stat().st_size / 300
    assert big < 200, big


def test_a_truncated_file_reads_its_whole_batches(tmp_path):
    p = tmp_path / "records.arrow"
    with ColumnarWriter(p, batch=100, flush_s=1e9) as w:
        w.write_many(rec(i) for i in range(250))
    data = p.read_bytes()
    sizes = []
    for cut in (len(data) - 8, len(data) - 200, len(data) // 2, 10):
        p.write_bytes(data[:cut])
        sizes.append(len(read_table_arrow(p)))
        assert columnar.problems(p), cut
    assert sizes[0] == 250 and sizes[1] in (200, 250) and sizes == sorted(sizes, reverse=True)
    assert sizes[-1] == 0


def test_a_killed_writer_leaves_what_it_flushed_and_the_run_dir_reads_invalid(tmp_path):
    p = tmp_path / "records.arrow"
    pid = os.fork()
    if pid == 0:                   # the writer: two batches flushed, 20 records kept, killed
        try:
            w = ColumnarWriter(p, batch=50, flush_s=1e9)
            for i in range(120):
                w.write(rec(i))
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert [x.id for x in read_table_arrow(p).records] == list(range(100))
    bad = validate_run_dir(tmp_path)
    assert "meta.json: missing" in bad
    assert any(b.startswith("records.arrow: no end mark after 100 records") for b in bad)
    assert not any(b.startswith("records.jsonl") for b in bad)


def test_two_readers_at_once_while_it_is_written(tmp_path):
    p = tmp_path / "records.arrow"
    w = ColumnarWriter(p, batch=10, flush_s=1e9)
    w.write_many(rec(i) for i in range(35))            # 3 batches out, 5 kept
    seen: list = []

    def read():
        seen.append(len(read_table_arrow(p)))

    ts = [threading.Thread(target=read) for _ in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    w.close()
    assert seen == [30, 30] and len(read_table_arrow(p)) == 35


def test_a_record_of_100000_chunks(tmp_path):
    p = tmp_path / "records.arrow"
    big = rec(0, tokens=100_000)
    with ColumnarWriter(p) as w:
        w.write(big)
        w.write(rec(1))
    t = read_table_arrow(p)
    assert len(t.records[0].chunks) == 100_002 and list(t.records[0].chunks[-1]) == big.chunks[-1]
    assert t.offsets.tolist() == [0, 100_002, 100_008]


def test_other_columns_or_not_arrow_are_named(tmp_path):
    p = tmp_path / "records.arrow"
    p.write_bytes(b"{}\n")
    assert columnar.problems(p)[0].startswith("records.arrow: not an Arrow IPC stream")
    import pyarrow as pa
    with pa.OSFile(str(p), "wb") as f, pa.ipc.new_stream(f, pa.schema([("id", pa.int64())])) as s:
        s.write_batch(pa.record_batch([pa.array([1])], names=["id"]))
    assert "columns differ" in columnar.problems(p)[0]
    assert json.dumps(columnar.SCHEMA.names[:3]) == '["chunks_t", "chunks_n", "id"]'


def test_a_run_dir_of_records_arrow_only_has_the_same_summary(tmp_path):
    from analysis.metrics.summary import summary_of
    from bench.report_speed import synthesise
    j, a = tmp_path / "jsonl", tmp_path / "arrow"
    synthesise(j, 300)
    a.mkdir()
    (a / "meta.json").write_bytes((j / "meta.json").read_bytes())
    from_jsonl(j / "records.jsonl", a / "records.arrow")
    assert validate_run_dir(a) == []
    assert json.dumps(summary_of(a), sort_keys=True, default=str) == \
        json.dumps(summary_of(j), sort_keys=True, default=str)
