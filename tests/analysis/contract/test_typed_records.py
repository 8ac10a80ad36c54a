"""Records are typed end to end: no dict shim on Record, and the table travels with the list
(analysis.contract.records.RecordList), never found again by a list's identity."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.contract.record import Record
from analysis.contract.records import RecordList, as_record, as_records, read_table
from analysis.metrics import figures as m
from tests.analysis.synth import rec, steady, write_run


def test_a_record_has_no_dict_shim_so_a_typo_is_an_error_not_none():
    r = Record(id=0, phase="measured")
    assert not hasattr(r, "get")
    with pytest.raises(TypeError):
        r["status"]                                      # noqa: B018
    with pytest.raises(AttributeError):
        r.ttft_at_ns                                     # noqa: B018  (a typo: not None)


def test_a_json_dict_is_read_as_a_record_its_values_as_they_are():
    r = as_record(rec(3, chunks=[[1, 0], [2, 1]]))
    assert isinstance(r, Record) and r.id == 3 and [list(c) for c in r.chunks] == [[1_000_000, 0], [2_000_000, 1]]
    assert as_record(r) is r
    loose = as_record({"status": "ok"})                  # hand-made: no id, no phase
    assert loose.id is None and loose.phase is None and loose.status == "ok"
    odd = as_record({"id": 0, "phase": "measured", "cached_tokens": "5", "x": 1})
    assert odd.cached_tokens == "5" and not hasattr(odd, "x")   # as it is: the gate judges it


def test_the_read_list_holds_its_table_and_selections_hold_theirs(tmp_path):
    d = write_run(tmp_path / "r", steady(12, warmup=2), {"mode": "server"})
    t = read_table(d / "records.jsonl")
    recs = t.records
    assert isinstance(recs, RecordList) and recs.table is t and as_records(recs) is recs
    meas = m.measured(recs)
    assert isinstance(meas, RecordList) and [r.id for r in meas] == list(range(2, 12))
    assert m.measured(recs) is meas                      # asked again: the same selection
    done = m.completed(meas)                             # a selection of a selection
    assert done.table.parent is t
    assert np.array_equal(done.table.t, t.t[t.offsets[2]:])
    copy = list(recs)                                    # no table: one is built, not looked up
    assert as_records(copy) is not copy and as_records(copy).table is not t
    assert np.array_equal(as_records(copy).table.t, t.t)
