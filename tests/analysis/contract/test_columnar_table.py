"""records.arrow read as columns (analysis.contract.columnar_table): the same summary as the
JSON reader's over records of every kind, no Record made per request for a plain summary, a
read-only lazy list that indexes, slices and walks like the JSON reader's."""
import json

import numpy as np
import pytest

from analysis.contract import columnar_lazy as columnar_table
from analysis.contract.columnar import ColumnarWriter
from analysis.contract.columnar_table import ArrowTable, LazyRecords
from analysis.contract.record import Record, ServerTiming
from analysis.contract.records import read_table
from analysis.metrics.summary import summarize_run


def rec(i: int, tokens: int = 4, **kw) -> Record:
    t = 1_000_000_000 + 10_000_000 * i
    ch = [[t + 1000, 0]] + [[t + 2000 + 500 * k, 1] for k in range(tokens)] + [[t + 9900, 0]]
    return Record(**{**dict(id=i, phase="measured", scheduled_at_ns=t - 50, sent_at_ns=t,
                            first_chunk_at_ns=ch[0][0], first_token_at_ns=ch[1][0] if tokens
                            else None, end_at_ns=ch[-1][0], chunks=ch, status="ok",
                            http_status=200, prompt_tokens=8, prompt_tokens_source="usage",
                            output_tokens=tokens, output_tokens_source="usage",
                            chunk_output_tokens=tokens, finish_reason="length"), **kw})


def varied(n: int = 400) -> list[Record]:
    """Records of every kind a summary looks at: warm-up, failures, cancels, hang-ups,
    sessions, models, replicas, tool calls, cached tokens, graded answers, server spans,
    retries, reasoning, images, a batch of text fields absent and present."""
    out = []
    for i in range(n):
        kw: dict = {}
        if i < 8:
            kw["phase"] = "warmup"
        if i % 37 == 5:
            kw.update(status="error", error_kind="http", http_status=503, error="busy",
                      retry_after_s=0.5, attempts=2,
                      attempt_log=[(503, 1, 2, "http"), (503, 3, 4, "http")])
        if i % 53 == 7:
            kw.update(status="cancelled", error_kind="cancelled")
        if i % 61 == 9:
            kw.update(status="aborted", error_kind="aborted")
        if i % 5 == 0:
            kw.update(session_id=f"s{i % 3}", turn=1 + i % 4)
        if i % 7 == 0:
            kw.update(model="lora-a" if i % 2 else "base", target_url=f"http://h{i % 2}:8000")
        if i % 11 == 0:
            kw.update(tool_calls=1, tool_args_parsed=True, tool_args_valid=bool(i % 2))
        if 100 <= i < 300:
            kw.update(cached_tokens=(i % 3) * 4, correct=bool(i % 4), input_images=i % 2)
        if i % 13 == 0:
            kw.update(server_timing=ServerTiming(queue_ms=1.0 + i, prefill_ms=2.0))
        if i % 17 == 0:
            kw.update(retries=1, first_sent_at_ns=1, retry_error="stale connection")
        if i % 9:                                   # one value a record: kept as arrow text
            kw["trace_id"] = f"{i:032x}"
        if i % 19 == 0:
            kw.update(reasoning_tokens=3, first_answer_at_ns=1_000_000_000 + 10_000_000 * i
                      + 4000)
        out.append(rec(i, tokens=i % 6, **kw))
    return out


def run_dir(d, recs, arrow: bool, batch: int = 64):
    d.mkdir()
    from bench.report_speed import synthesise
    synthesise(d / "_m", 1)
    meta = json.loads((d / "_m" / "meta.json").read_text())
    meta.update(num_requests=len(recs) - 8, warmup_requests=8, records_written=len(recs),
                t0_ns=recs[0].scheduled_at_ns, end_ns=max(r.end_at_ns for r in recs))
    (d / "meta.json").write_text(json.dumps(meta))
    if arrow:
        with ColumnarWriter(d / "records.arrow", batch=batch, flush_s=1e9) as w:
            w.write_many(recs)
    else:
        (d / "records.jsonl").write_text("".join(r.to_json() + "\n" for r in recs))
    return d


def test_every_figure_the_same_as_the_json_readers(tmp_path):
    recs = varied()
    a = summarize_run(run_dir(tmp_path / "a", recs, arrow=True))
    j = summarize_run(run_dir(tmp_path / "j", recs, arrow=False))
    assert a["requests_completed"] > 300 and a["sessions"] and a["models"]
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(j, sort_keys=True,
                                                                    default=str)


def test_a_plain_summary_makes_no_record_per_request(tmp_path, monkeypatch):
    made = []
    real = ArrowTable.build
    monkeypatch.setattr(ArrowTable, "build", lambda self, idx: made.append(len(idx)) or
                        real(self, idx))
    recs = [rec(i) for i in range(2000)]
    d = run_dir(tmp_path / "a", recs, arrow=True, batch=512)
    assert summarize_run(d)["requests_completed"] == 2000
    assert sum(made) < 20, made           # the columns only (a record or two looked at, at most)


def test_the_lazy_list_reads_like_the_json_readers_list(tmp_path):
    recs = varied(150)
    ta = read_table(run_dir(tmp_path / "a", recs, arrow=True, batch=16) / "records.arrow")
    tj = read_table(run_dir(tmp_path / "j", recs, arrow=False) / "records.jsonl")
    la, lj = ta.records, tj.records
    assert isinstance(la, LazyRecords) and len(la) == len(lj) == 150
    key = (lambda r: {**r.as_dict(), "chunks": [list(c) for c in r.chunks]})
    assert [key(r) for r in la] == [key(r) for r in lj]
    assert key(la[-1]) == key(lj[-1]) and key(la[17]) == key(lj[17])
    assert [key(r) for r in la[10:40:3]] == [key(r) for r in lj[10:40:3]]
    with pytest.raises(IndexError):
        la[150]
    with pytest.raises(TypeError):
        la.append(recs[0])
    for name in ("sent_at_ns", "status", "model", "cached_tokens", "correct", "tool_calls",
                 "server_timing", "attempt_log", "retry_after_s", "id", "trace_id"):
        assert ta.values(name) == tj._values(name), name
        assert list(ta.column(name)) == list(tj.column(name)), name
    for name in ("end_at_ns", "first_answer_at_ns", "id"):
        for x, y in zip(ta.stamp(name), tj.stamp(name)):
            assert np.array_equal(x, y), name
    assert np.array_equal(ta.t, tj.t) and np.array_equal(ta.n, tj.n)
    assert np.array_equal(ta.offsets, tj.offsets)
    # a selection that is one run of records is a view; any other gathers
    from analysis.metrics.figures import completed, measured
    ma, mj = measured(la), measured(lj)
    assert isinstance(ma.table.idx, slice) and len(ma) == len(mj) == 142
    ca, cj = completed(ma), completed(mj)
    assert [key(r) for r in ca] == [key(r) for r in cj]
    assert np.array_equal(ca.table.t, cj.table.t)
    assert np.array_equal(ca.table.offsets, cj.table.offsets)


def test_counts_are_kept_narrow_and_a_big_one_widens(tmp_path):
    recs = [rec(i) for i in range(40)]
    recs[30] = rec(30, prompt_tokens=3_000_000_000)          # past int32: kept exact
    t = read_table(run_dir(tmp_path / "a", recs, arrow=True, batch=8) / "records.arrow")
    assert t.raw("output_tokens")[0].dtype == np.int8
    assert t.raw("prompt_tokens")[0].dtype == np.int64
    assert t.values("prompt_tokens")[30] == 3_000_000_000
    assert t.raw("sent_at_ns")[0].dtype == np.int64 and t.n.dtype == np.int16
    assert columnar_table.BLOCK >= 1


def test_open_run_tables_the_same_as_from_the_json_reader(tmp_path):
    import pandas as pd
    from analysis.contract.open_run import open_run
    recs = varied(120)
    a = open_run(run_dir(tmp_path / "a", recs, arrow=True, batch=32))
    j = open_run(run_dir(tmp_path / "j", recs, arrow=False))
    for phase in (None, "measured", "warmup"):
        ra, rj = a.records(phase), j.records(phase)
        assert list(ra.columns) == list(rj.columns)
        assert ra.dtypes.to_dict() == rj.dtypes.to_dict(), phase
        pd.testing.assert_frame_equal(ra, rj)
        pd.testing.assert_frame_equal(a.chunks(phase), j.chunks(phase))


def test_every_reader_finds_an_arrow_only_run(tmp_path):
    """No reader looks for records.jsonl by name: the store is found through
    analysis.contract.rundir.has_records / records_path (else an arrow-only run is 'not a run
    directory' to compare, has no records to the server-metrics join, no sweep point)."""
    import re
    from pathlib import Path
    from analysis.contract.rundir import has_records, records_path
    from analysis.report.compare import repeat_runs
    from loadgen.commands.compare import expand
    root = Path(__file__).resolve().parents[3]
    named = [f"{p.relative_to(root)}:{k + 1}" for d in ("analysis", "loadgen/commands")
             for p in (root / d).rglob("*.py")
             for k, line in enumerate(p.read_text().splitlines())
             if re.search(r'"records\.jsonl"\)\.is_file\(\)|read_records\(\w+ / "records\.jsonl"\)',
                          line)]
    assert named == [], named
    series = tmp_path / "series"
    series.mkdir()
    d = run_dir(series / "run-1", [rec(i) for i in range(20)], arrow=True)
    assert has_records(d) and records_path(d).name == "records.arrow"
    e = run_dir(tmp_path / "other", [rec(i) for i in range(20)], arrow=True)
    assert repeat_runs(series) == [d] and expand([str(d), str(e)]) == [d, e]


def test_a_batch_where_every_record_has_the_same_retry_log_shape(tmp_path):
    """Nested values of one shape in a whole batch (api.retry on, two attempts each) stay one
    object a record (numpy must not read them as a 3-D array)."""
    log = [(503, 1, 2, "http"), (200, 3, 4, None)]
    recs = [rec(i, attempts=2, attempt_log=log) for i in range(12)]
    t = read_table(run_dir(tmp_path / "a", recs, arrow=True, batch=4) / "records.arrow")
    assert t.values("attempt_log") == [log] * 12
    assert [r.attempt_log for r in t.records] == [log] * 12


# ---- issue 42: the table a group of batches at a time ----------------------------------------
def _same_tables(a, b):
    assert len(a) == len(b)
    assert np.array_equal(a.t, b.t) and np.array_equal(a.n, b.n) and a.n.dtype == b.n.dtype
    assert np.array_equal(a.offsets, b.offsets)
    for f in a._raw:
        assert a.values(f) == b.values(f), f
        ra, rb = a.raw(f), b.raw(f)
        assert (ra is None) == (rb is None), f
        if ra is not None and not isinstance(ra[0], columnar_table_mod._Text):
            assert ra[0].dtype == rb[0].dtype, f


columnar_table_mod = __import__("analysis.contract.columnar_table", fromlist=["x"])
columnar_pieces = __import__("analysis.contract.columnar_pieces", fromlist=["x"])


def test_any_grouping_of_the_writers_batches_reads_the_same_table(tmp_path, monkeypatch):
    """Batches of 16 read as groups of one batch, of three batches, or all at once: the same
    columns, values, narrow types and presence; text of one value a record (trace ids) left in
    the file and read when asked."""
    recs = varied(200)
    path = run_dir(tmp_path / "a", recs, arrow=True, batch=16) / "records.arrow"
    tables = []
    for group in (1, 40, 1 << 16):
        monkeypatch.setattr(columnar_pieces, "GROUP", group)
        tables.append(ArrowTable(path))
    assert isinstance(tables[0]._raw["trace_id"], columnar_table_mod._Wide)
    for t in tables[1:]:
        _same_tables(tables[0], t)
    assert tables[0].values("trace_id") == [r.trace_id for r in recs]


def test_groups_stop_at_the_counted_rows(tmp_path):
    """A file that grew between the count and the read: exactly the counted rows."""
    path = run_dir(tmp_path / "a", [rec(i) for i in range(50)], arrow=True, batch=8) / \
        "records.arrow"
    for n in (0, 1, 8, 13, 50):
        got = list(columnar_pieces._groups(path, n))
        assert sum(g.num_rows for _, g in got) == n
        assert [lo for lo, _ in got] == sorted(lo for lo, _ in got)


def test_equal_stamp_columns_are_held_once_and_read_only(tmp_path):
    recs = [rec(i, first_answer_at_ns=None) for i in range(30)]
    recs = [Record(**{**{f: getattr(r, f) for f in r.__struct_fields__},
                      "first_answer_at_ns": r.first_token_at_ns}) for r in recs]
    t = ArrowTable(run_dir(tmp_path / "a", recs, arrow=True, batch=8) / "records.arrow")
    a, b = t.raw("first_token_at_ns")[0], t.raw("first_answer_at_ns")[0]
    assert a is b and not a.flags.writeable
    assert t.values("first_answer_at_ns") == [r.first_token_at_ns for r in recs]
    with pytest.raises(ValueError):
        a[0] = 1


def test_open_run_sorts_records_written_out_of_id_order_as_the_json_reader(tmp_path):
    """Records land in the order they finish, not by id: the frame's rows by id, the same as
    the JSON reader's sort_index, and with a shared id (a corrupt run) the same as well."""
    import pandas as pd
    from analysis.contract.open_run import open_run
    recs = varied(60)
    rng = np.random.default_rng(4)
    mixed = recs[:8] + [recs[8 + i] for i in rng.permutation(len(recs) - 8)]
    for name, rs in (("shuffled", mixed), ("shared", mixed[:30] + [mixed[12]] + mixed[30:])):
        a = open_run(run_dir(tmp_path / f"a-{name}", rs, arrow=True, batch=7))
        j = open_run(run_dir(tmp_path / f"j-{name}", rs, arrow=False))
        for phase in (None, "measured"):
            pd.testing.assert_frame_equal(a.records(phase), j.records(phase))
            pd.testing.assert_frame_equal(a.chunks(phase), j.chunks(phase))
