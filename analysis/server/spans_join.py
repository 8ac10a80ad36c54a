"""The join: the server's checked span timings ─► each record's ``server_timing``, by trace id.

    Receiver.snapshot()["timings"] {trace_id: ServerTiming fields}
        + records.jsonl (each record's ``trace_id``: loadgen.client.trace_context)
        ─► join_file(path, timings, source) ─► records.jsonl rewritten in one pass (temp file,
           fsync, rename: a reader sees the old file or the new one) with ``server_timing`` on
           every matched record; untouched when nothing matched (records.arrow,
           output.records: arrow: join_arrow, the same a record batch at a time)
        ─► stats: records with a trace id, joined, spans matching no record (``unmatched``)
    stats + the receiver's counts ─► server_spans.json (loadgen.run.server_traces), which
    analysis.server.timing_summary reads for summary.json ``server_timing``.

A line written by Record.to_json ends in ``"server_timing":null}``: the joined value replaces
that null and nothing else of the line changes; any other line goes through Record (the same
keys, re-encoded). Lines that do not parse are kept as they are (validate_run_dir's to name).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import msgspec

from analysis.contract.record import Record, ServerTiming

_TAIL = b'"server_timing":null}'


class _Tid(msgspec.Struct):
    trace_id: Optional[str] = None


_tid = msgspec.json.Decoder(_Tid).decode
_enc = msgspec.json.Encoder().encode


def server_timing(fields: dict, source: str) -> ServerTiming:
    return ServerTiming(**fields, source=source)


def join_line(line: bytes, timings: dict, source: str, seen: set) -> tuple[bytes, int]:
    """One records.jsonl line (no newline) with its span joined; (line, 1 if it had a trace
    id else 0). ``seen`` collects the matched trace ids."""
    try:
        tid = _tid(line).trace_id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return line, 0
    if tid is None:
        return line, 0
    t = timings.get(tid)
    if t is None:
        return line, 1
    seen.add(tid)
    st = _enc(server_timing(t, source))
    if line.endswith(_TAIL):
        return line[: -len(_TAIL)] + b'"server_timing":' + st + b"}", 1
    try:
        rec = msgspec.json.decode(line, type=Record)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return line, 1
    rec.server_timing = server_timing(t, source)
    return rec.to_json().encode("utf-8"), 1


def join_file(path: Path, timings: dict, source: str = "otlp") -> dict:
    """Join ``timings`` into the records at ``path`` (see the module doc); the stats."""
    path = Path(path)
    if not timings or not path.exists():
        return _stats(path, timings, set(), None)
    if path.suffix == ".arrow":
        return join_arrow(path, timings, source)

    def fill(out, seen: set) -> int:
        with_tid = 0
        with path.open("rb") as src:
            for raw in src:
                body = raw.rstrip(b"\n")
                line, has = join_line(body, timings, source, seen)
                with_tid += has
                out.write(line + raw[len(body):])
        return with_tid
    return _stats(path, timings, *_rewrite(path, fill))


def join_arrow(path: Path, timings: dict, source: str = "otlp") -> dict:
    """join_file of records.arrow (output.records: arrow): rewritten a record batch at a time,
    each batch's ``server_timing`` column set where its trace id matched (the rest of the batch
    as it was), the same temp file, fsync and rename; untouched when nothing matched."""
    import pyarrow as pa

    from analysis.contract.columnar import _OPTIONS, _TYPES, SCHEMA, _column, batches
    at = SCHEMA.get_field_index("server_timing")

    def fill(out, seen: set) -> int:
        with_tid = 0
        w = pa.ipc.new_stream(out, SCHEMA, options=_OPTIONS)
        for b in batches(path):
            tids = b.column("trace_id").to_pylist()
            with_tid += len(tids) - tids.count(None)
            new, hit = b.column(at).to_pylist(), False
            for i, tid in enumerate(tids):
                t = None if tid is None else timings.get(tid)
                if t is not None:
                    seen.add(tid)
                    new[i], hit = _enc(server_timing(t, source)).decode("utf-8"), True
            if hit:
                b = b.set_column(at, "server_timing", _column(new, _TYPES["server_timing"]))
            w.write_batch(b)
        w.close()
        return with_tid
    return _stats(path, timings, *_rewrite(path, fill))


def _rewrite(path: Path, fill) -> tuple[set, int]:
    """``fill(out, seen)`` (─► records with a trace id) into a temp file beside ``path``,
    fsync'd, renamed over it only when a span matched; (the matched trace ids, that count)."""
    seen: set = set()
    fd, tmp = tempfile.mkstemp(prefix=".records.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            with_tid = fill(out, seen)
            out.flush()
            os.fsync(out.fileno())
        if seen:
            os.replace(tmp, path)
            tmp = None
    finally:
        if tmp is not None:
            os.unlink(tmp)
    return seen, with_tid


def _stats(path: Path, timings: dict, seen: set, with_tid: Optional[int]) -> dict:
    return {"records_with_trace_id": with_tid, "joined": len(seen),
            "spans": len(timings), "unmatched_spans": len(timings) - len(seen)}
