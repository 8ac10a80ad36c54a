"""What analysis takes as records: a RecordList (records holding their table), else Records or
their JSON dicts, read as Records on the way in.

    analysis.contract.records.read_table ─► RecordList (its .table: the RecordTable over it)
    a JSON dict (a test's, a notebook's, a live feed's line) ─► as_record ─► a Record
    analysis.contract.records.as_records ─► a RecordList and its table, whatever came in
Record has no dict access (a misspelt field is an AttributeError, never a silent None).
"""
from __future__ import annotations

from typing import Literal, Optional, Union

from analysis.contract.record import Record


class RecordList(list):
    """Records in order, holding the RecordTable over them (``table``) and the per-field
    value lists asked for so far (analysis.metrics.figures.field). Select from it; do not
    append to or reorder it."""
    __slots__ = ("table", "memo")

    def __init__(self, records=(), table: Optional[object] = None):
        super().__init__(records)
        self.table = table
        self.memo: dict = {}


# What analysis takes (signatures): read_table's RecordList (or a selection of it), else Records
# or their JSON dicts, which as_records / as_record read as Records on the way in.
Records = Union[RecordList, list[Record], list[dict]]
RecordIn = Union[Record, dict]
_FIELD_SET = frozenset(Record.__struct_fields__)


class _Loose(Record, gc=False):
    """A record's JSON dict as read by as_record: an id or phase may be missing (hand-made)."""
    id: Optional[int] = None
    phase: Optional[Literal["warmup", "measured", "probe_alone", "probe"]] = None


def as_record(rec) -> Record:
    """``rec`` (a Record, or its JSON dict) as a Record: the dict's contract fields, as they are
    (a missing one: its default; a key outside the contract: dropped). What a value is worth is
    the readers' gate's to say (analysis.contract.sanity), as for a read file's."""
    if isinstance(rec, Record):
        return rec
    return _Loose(**{k: v for k, v in rec.items() if k in _FIELD_SET})
