"""A run directory for notebooks: typed files and pandas tables (``loadgen.open_run(path)``).

    run_dir ─► open_run(path) ─► RunData
        .meta / .sut / .server   RunMeta / Sut / ServerLife (None when the file is absent)
        .summary                 Summary: summary.json, or computed by analysis.metrics.summary
                                 (the same function the run used) when absent or older
        .table                   RecordTable (analysis.contract.records): Records + numpy arrays
        .records()               DataFrame, one row per request (index: id), built from arrays
        .chunks()                DataFrame, one row per streamed chunk (the flat chunk array)

Times in the tables are milliseconds from the run's t0 (meta ``t0_ns``, the start of the measured
phase; warm-up requests have negative times). ``t0_source`` says where t0 came from.
"""
from __future__ import annotations

import types
import typing
from functools import cached_property
from operator import attrgetter
from pathlib import Path
from typing import Optional

import msgspec
import numpy as np

from analysis.contract import timing
from analysis.contract.base import SCHEMA_VERSION
from analysis.contract.meta import RunMeta
from analysis.contract.record import FIELDS, Record
from analysis.contract.records import read_table
from analysis.contract.rundir import read_meta, read_server, read_summary, read_sut, records_path
from analysis.contract.summary import Summary
from analysis.contract.summary_blocks import nonfinite_keys
from analysis.contract.target import ServerLife, Sut

def _kinds(t) -> set:
    """The types a field's value can be: Annotated / Optional / Union unwrapped; a list or a
    tuple counts as itself, not as its items (attempt_log is no integer field)."""
    origin = typing.get_origin(t)
    if origin is typing.Annotated:
        return _kinds(typing.get_args(t)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_kinds(a) for a in typing.get_args(t)))
    return {origin or t}


STAMPS = ("scheduled_at_ns", "sent_at_ns", "first_chunk_at_ns", "first_token_at_ns",
          "first_answer_at_ns", "end_at_ns", "first_sent_at_ns")
DERIVED = ("ttft_ms", "ttft_from_scheduled_ms", "tpot_ms", "e2el_ms", "e2el_from_scheduled_ms",
           "schedule_lag_ms")
NS_PER_MS = timing.NS_PER_MS
SKIP = ("chunks", "output_text")


INT_FIELDS = {f.name for f in msgspec.structs.fields(Record)
              if _kinds(f.type) - {type(None)} == {int}}


def _column(recs, name: str):
    """A field of every record as pandas would infer it from the values (int, with a None:
    float with NaN), built as an array for the integer fields (no per-value inference).
    ``recs``: Records, or a columnar table (records.arrow: its column, no Record made)."""
    if getattr(recs, "columnar", False):           # records.arrow: an array, no list
        return recs.frame_column(name, name in INT_FIELDS)
    vals = list(map(attrgetter(name), recs))
    if name in INT_FIELDS:
        nones = vals.count(None)
        if nones == len(vals):
            return vals
        if not nones:                               # every value an int: one C conversion
            a = np.array(vals, dtype=np.int64)
            if a.size and int(np.abs(a).max()) < 2 ** 53:   # (what the float route keeps)
                return a
        a = np.array(vals, dtype=float)             # None ─► NaN (counts, ids: exact below 2^53)
        nan = np.isnan(a)
        if nan.all():
            return vals
        return a if nan.any() else a.astype(np.int64)
    return vals


def _by_id(table, keep: np.ndarray) -> Optional[np.ndarray]:
    """The kept records' positions in id order (sort_index's order: one sort of the ids, then
    every column taken once, narrow), or None when two share an id (sort_index decides)."""
    idx = np.flatnonzero(keep)
    ids, ok = table.stamp("id")
    if not ok[idx].all():                   # (an id missing: the frame's own way)
        return None
    ids = ids[idx]
    if ids.size > 1 and (ids[1:] < ids[:-1]).any():
        order = np.argsort(ids, kind="stable")
        idx, ids = idx[order], ids[order]
    return None if ids.size > 1 and not (ids[1:] > ids[:-1]).all() else idx


def _ms_name(stamp: str) -> str:
    return stamp.replace("_at_ns", "_ms")          # sent_at_ns -> sent_ms


class RunData:
    """One run directory, read through the contract (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not records_path(self.path).is_file():
            raise FileNotFoundError(f"{self.path}: no records.jsonl (not a run directory?)")
        self.meta: Optional[RunMeta] = read_meta(self.path)
        self.sut: Optional[Sut] = read_sut(self.path)
        self.server: Optional[ServerLife] = read_server(self.path)

    def __repr__(self) -> str:
        mode = self.meta.mode if self.meta else None
        return f"RunData({str(self.path)!r}, mode={mode!r})"

    @cached_property
    def table(self):
        """records.jsonl (records.arrow where there is one) as a RecordTable
        (analysis.contract.records: Records + arrays)."""
        return read_table(records_path(self.path))

    @property
    def raw_records(self) -> list:
        """records.jsonl as Records (the form analysis.metrics reads)."""
        return self.table.records

    @cached_property
    def summary(self) -> Summary:
        s = read_summary(self.path)
        if s is not None and s.schema_version == SCHEMA_VERSION and not nonfinite_keys(s):
            return s                                          # (NaN / Infinity: edited)
        from analysis.metrics.summary import summarize_run   # older or missing: the one function
        return Summary.read(summarize_run(self.path))

    @cached_property
    def _t0(self) -> tuple[Optional[int], str]:
        if self.meta is not None and self.meta.t0_ns is not None:
            return self.meta.t0_ns, "meta.json t0_ns"
        v, ok = self.table.stamp("sent_at_ns")
        sent = v[ok & (self.table.column("phase") != "warmup")]
        return (int(sent.min()), "first measured send (meta.json has no t0_ns)") if sent.size else \
            (None, "none (no t0_ns and nothing sent): times are raw nanoseconds / 1e6")

    @property
    def t0_ns(self) -> Optional[int]:
        return self._t0[0]

    @property
    def t0_source(self) -> str:
        return self._t0[1]

    def _ms(self, t: Optional[int]) -> Optional[float]:
        return None if t is None else (t - (self.t0_ns or 0)) / NS_PER_MS

    def _ms_col(self, name: str) -> np.ndarray:
        v, ok = self.table.stamp(name)
        out = (v - (self.t0_ns or 0)).astype(float) / NS_PER_MS
        out[~ok] = np.nan
        return out

    def _keep(self, phase: Optional[str]) -> np.ndarray:
        return np.ones(len(self.table), bool) if phase is None else \
            self.table.column("phase") == phase

    def records(self, phase: Optional[str] = None):
        """One row per request, index ``id``: every scalar field of the record, each
        ``*_at_ns`` stamp as ``*_ms`` from t0, and the per-request figures of
        analysis.contract.timing (ttft_ms, tpot_ms, e2el_ms, ...; NaN where undefined).
        ``phase``: "measured" or "warmup" to keep only those."""
        import pandas as pd
        t, keep = self.table, self._keep(phase)
        if not keep.any():
            return pd.DataFrame()
        rows = _by_id(t, keep) if getattr(t, "columnar", False) else None
        if rows is not None:                 # records.arrow: the columns, taken in id order
            cols: dict = {k: t.frame_column(k, k in INT_FIELDS, rows)
                          for k in FIELDS if k not in SKIP and k not in STAMPS}
        else:
            rows = keep
            recs = t.records if keep.all() else [t.records[i] for i in np.flatnonzero(keep).tolist()]
            cols = {k: _column(recs, k) for k in FIELDS if k not in SKIP and k not in STAMPS}
        cols.update({_ms_name(k): self._ms_col(k)[rows] for k in STAMPS})
        figs = timing.per_record(t)
        cols.update({k: figs[k][rows] for k in DERIVED})
        cols["n_chunks"] = np.diff(t.offsets)[rows]
        df = pd.DataFrame(cols, copy=False).set_index("id")    # fresh arrays: kept
        return df if rows is not keep else df.sort_index()

    def chunks(self, phase: Optional[str] = None):
        """One row per streamed data event: ``id``, ``phase``, ``index`` (0-based in its
        request), ``t_ms`` (arrival, from t0), ``n_tokens`` (0: role-only / usage-only),
        ``since_sent_ms`` and ``gap_ms`` (from the request's previous chunk; NaN for the first)."""
        import pandas as pd
        t = self.table
        owner = t.record_of_chunk()
        keep = self._keep(phase)[owner]
        every = bool(keep.all())                 # (every chunk: the arrays as they are)
        at = np.arange(owner.size) if every else np.flatnonzero(keep)
        owner = owner if every else owner[keep]
        tt, n = (t.t, t.n) if every else (t.t[keep], t.n[keep])
        index = at - t.offsets[owner]
        sent, ok = t.stamp("sent_at_ns")
        since = (tt - sent[owner]).astype(float) / NS_PER_MS
        since[~ok[owner]] = np.nan
        gap = np.full(tt.size, np.nan)
        later = index > 0
        gap[later] = (tt[later] - t.t[at[later] - 1]).astype(float) / NS_PER_MS
        columnar = getattr(t, "columnar", False)
        ids = t.stamp("id")[0] if columnar else \
            np.asarray([r.id for r in t.records], dtype=np.int64)
        return pd.DataFrame({"id": ids[owner], "phase": t.column("phase")[owner],
                             "index": index, "t_ms": (tt - (self.t0_ns or 0)).astype(float)
                             / NS_PER_MS, "n_tokens": n.astype(np.int64), "since_sent_ms": since,
                             "gap_ms": gap}, copy=False)   # fresh arrays: not copied again


def open_run(path: str | Path) -> RunData:
    """The run directory at ``path`` for notebooks (see the module docstring)."""
    return RunData(path)
