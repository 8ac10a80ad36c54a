"""Which merge writes a run's records from its senders' parts: merge.py into records.jsonl, or
merge_arrow.py into records.arrow (output.records: arrow, issue 42), by the output's suffix.

    parts (records.K.jsonl | records.K.arrow) + owed ids ─► merge_store.merge ─► the run's store
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from loadgen.engine.core import merge as merge_jsonl


def merge(parts: list[Path], owed: list[Iterable[merge_jsonl.Owed]], why: list[str],
          out_path: Path, end_ns: Optional[int]) -> dict:
    """merge.merge into records.jsonl, or merge_arrow.merge into records.arrow (the parts'
    batches, a batch at a time; the run's empty records.jsonl removed). The counts for
    meta.json."""
    if Path(out_path).suffix != ".arrow":
        return merge_jsonl.merge(parts, owed, why, out_path, end_ns)
    from loadgen.engine.core import merge_arrow             # pyarrow: only when asked
    Path(out_path).with_name("records.jsonl").unlink(missing_ok=True)
    return merge_arrow.merge(parts, owed, why, out_path, end_ns)
