"""analysis.contract.records: records.jsonl decoded in bounded slices into the one Record type and
numpy arrays; the same records and chunks whatever the slice size; bad lines named."""
import json

import numpy as np
import pytest

from analysis.contract import ContractError, Record
from analysis.contract.records import read_records, read_table, table_of
from tests.analysis.synth import steady, write_run


def test_an_empty_file_reads_as_no_records(tmp_path):
    (tmp_path / "records.jsonl").write_text("")
    t = read_table(tmp_path / "records.jsonl")
    assert t.records == [] and t.t.size == 0 and t.offsets.tolist() == [0]


def test_slices_of_any_size_give_the_same_records_and_chunks(tmp_path):
    recs = steady(40, warmup=3)
    d = write_run(tmp_path / "r", recs, {"mode": "server"})
    path = d / "records.jsonl"
    whole = read_table(path)
    for size in (64, 1000, 1 << 20):          # smaller than one line: whole lines still
        t = read_table(path, slice_bytes=size) if size != 1 << 20 else whole
        assert [r.id for r in t.records] == list(range(40))
        assert all(isinstance(r, Record) for r in t.records)
        for r, src in zip(t.records, recs):
            assert [list(c) for c in r.chunks] == src["chunks"]
            assert r.sent_at_ns == src["sent_at_ns"] and r.phase == src["phase"]
        assert np.array_equal(t.t, whole.t) and np.array_equal(t.offsets, whole.offsets)
        path.touch()                           # a new mtime: not the cached table


def test_a_torn_last_line_is_skipped_and_a_bad_field_is_named(tmp_path):
    recs = steady(3)
    p = tmp_path / "records.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"id": 3, "pha')
    assert [r.id for r in read_records(p)] == [0, 1, 2]
    recs[1]["sent_at_ns"] = "late"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ContractError, match=r"records.jsonl:2: sent_at_ns: Expected `int"):
        read_records(p)
    recs[1]["sent_at_ns"] = 5
    recs[1]["chunks"] = [[1, "x"]]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ContractError, match=r"chunks"):
        read_records(p)


def test_a_table_over_plain_dicts_equals_the_read_one(tmp_path):
    recs = steady(10)
    d = write_run(tmp_path / "r", recs, {"mode": "server"})
    read = read_table(d / "records.jsonl")
    plain = table_of(recs)
    assert np.array_equal(read.t, plain.t) and np.array_equal(read.n, plain.n)
    assert np.array_equal(read.stamp("end_at_ns")[0], plain.stamp("end_at_ns")[0])
    sub = table_of(read.records[2:5])            # a selection of read records
    assert [r.id for r in sub.records] == [2, 3, 4]
    assert np.array_equal(sub.t, read.t[read.offsets[2]:read.offsets[5]])


def test_slices_name_the_right_line_and_keep_a_last_line_without_newline(tmp_path):
    recs = steady(30)
    p = tmp_path / "records.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs).rstrip("\n"))   # no final newline
    for size in (100, 4096, 1 << 20):
        t = read_table(p, slice_bytes=size)
        assert [r.id for r in t.records] == list(range(30))
        assert [list(c) for c in t.records[-1].chunks] == recs[-1]["chunks"]
        p.touch()
    recs[23]["end_at_ns"] = "late"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for size in (100, 4096):                     # the line number counts every slice before it
        with pytest.raises(ContractError, match=r"records.jsonl:24: end_at_ns"):
            read_table(p, slice_bytes=size)
        p.touch()
    recs[23]["end_at_ns"] = 5
    recs[7]["chunks"] = None                     # not a list: named, never read as no chunks
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ContractError, match=r"chunks"):
        read_table(p, slice_bytes=4096)
