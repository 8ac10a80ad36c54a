"""The send journal: what a sender started, for the senders that leave their records in part
files a parent cannot count (the Locust workers; a --procs child reports its counts instead).
Pure file work, no loop: the worker writes the lines, the merging side reads them.

    journal_line(rec, shift)      one sent request, just before the send ─► sent.worker-i.jsonl
                                  (id, phase, times on the run's clock, token counts, session
                                  id / turn): what a cancelled record keeps when none comes
    owed(plan, n, journal, ...)   plan.expected_ids() ∪ journal ─► each sender's merge.Owed (its
                                  owner by partition.owner), with why it has no record:
                                  "worker i died mid-request" / "... before sending it" / "run
                                  interrupted ..." / "no record from worker i ..."
    merge_parts(dir, ...)         records.worker-i.jsonl + owed ─► merge.merge ─► records.jsonl,
                                  the counts for meta.json (output.records: arrow: the workers'
                                  .arrow parts ─► merge_arrow.merge ─► records.arrow)
    merge_master(dir, run_dir, ...) the same from the Locust master's state (master.json: t0,
                                  end, interrupted, each worker's status): loadgen run's and
                                  the locustfile's one call
    Follower                      the same files tailed during the run: the progress counters
                                  (.arrow parts: a record batch at a time, each read once)
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Optional

import msgspec

from loadgen.record import Record, now_ns, read_records
from loadgen.engine.core import merge as merge_mod, merge_store
from loadgen.engine.core.partition import owner

DEAD = ("dead", "never_ready")


def journal_line(rec: Record, shift: int = 0) -> str:
    sched = rec.scheduled_at_ns
    return json.dumps({"id": rec.id, "phase": rec.phase,
                       "scheduled_at_ns": sched + shift if sched is not None else None,
                       "sent_at_ns": now_ns() + shift,
                       "requested_output_tokens": rec.requested_output_tokens,
                       "workload_prompt_tokens": rec.workload_prompt_tokens,
                       "session_id": rec.session_id, "turn": rec.turn})


def read_journal(d: Path) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for f in sorted(d.glob("sent.worker-*.jsonl")):
        for row in read_records(f):
            out.setdefault(int(row["id"]), row)
    return out


def _why(w: int, status: Optional[str], sent: bool, interrupted: bool) -> str:
    if status in DEAD:
        what = "died" if status == "dead" else "never became ready"
        return f"worker {w} {what} {'mid-request' if sent else 'before sending it'}"
    if interrupted:
        return ("run interrupted before the request ended" if sent
                else "scheduled but never sent: run interrupted")
    return f"no record from worker {w} ({status or 'no status'}): run ended early"


def owed(plan, n: int, journal: dict[int, dict], status: dict[int, str],
         t0_ns: Optional[int], interrupted: bool) -> list[list]:
    """Each sender's owed requests (merge.Owed, id order): the plan's and what it journaled."""
    offs = None if plan.sessions else plan.schedule.offsets_ns   # sessions: per session
    out: list[list] = [[] for _ in range(n)]
    for rid in sorted(set(plan.expected_ids()) | set(journal)):
        w, j = owner(rid, plan.warmup, n), journal.get(rid) or {}
        sched = j.get("scheduled_at_ns")
        if sched is None and t0_ns is not None and offs is not None and rid >= plan.warmup:
            sched = t0_ns + int(offs[rid - plan.warmup])
        out[w].append(merge_mod.Owed(
            rid, "warmup" if rid < plan.warmup else "measured", sched,
            j.get("requested_output_tokens"), j.get("workload_prompt_tokens"),
            j.get("sent_at_ns"), j.get("session_id"), j.get("turn"),
            _why(w, status.get(w), bool(j), interrupted)))
    return out


def merge_parts(d: Path, out_path: Path, plan, n: int, status: dict[int, str],
                t0_ns: Optional[int], interrupted: bool, end_ns: Optional[int] = None) -> dict:
    """Write ``out_path`` by the one merge (records.jsonl; records.arrow: merge_arrow, each
    worker's .arrow part, or the .jsonl the coordinator wrote for a remote worker: part_of);
    return counts for meta.json."""
    journal = read_journal(d)
    if out_path.suffix == ".arrow":
        from loadgen.engine.core.merge_arrow import part_of
        parts = [part_of(d / f"records.worker-{w}") for w in range(n)]
    else:
        parts = [d / f"records.worker-{w}.jsonl" for w in range(n)]
    got = merge_store.merge(parts, owed(plan, n, journal, status, t0_ns, interrupted),
                            [""] * n, out_path, end_ns)
    made = {"dead": 0, "interrupted": 0, "other": 0}
    for w, k in enumerate(got["cancelled_by_process"]):
        made["dead" if status.get(w) in DEAD else
             "interrupted" if interrupted else "other"] += k
    return {"records": got["records"], "from_workers": got["from_processes"],
            "cancelled_for_dead_workers": made["dead"],
            "cancelled_interrupted": made["interrupted"], "cancelled_other": made["other"],
            "journaled_sends": len(journal)}


def worker_status(st: dict) -> dict[int, str]:
    """Each worker's status in the master's state (master.json's ``workers``)."""
    return {int(k): v.get("status") for k, v in (st.get("workers") or {}).items()}


def merge_master(d: Path, run_dir: Path, plan, st: dict, n: int,
                 status: Optional[dict[int, str]] = None, interrupted=False) -> dict:
    """merge_parts of ``d``'s parts into ``run_dir``/records.jsonl (output.records: arrow:
    records.arrow) by the master's state ``st`` (``status``: its workers' statuses as the
    caller saw them; interrupted: also if ``st`` says)."""
    out = getattr(getattr(plan, "sc", None), "output", None)
    name = "records.arrow" if getattr(out, "records", None) == "arrow" else "records.jsonl"
    return merge_parts(d, Path(run_dir) / name, plan, n,
                       worker_status(st) if status is None else status, st.get("t0_ns"),
                       bool(interrupted or st.get("interrupted")), st.get("end_ns"))


class _Row(msgspec.Struct):
    """What the progress display needs of a record or journal line (the rest is skipped)."""
    id: int
    status: Optional[str] = None
    output_tokens: Optional[int] = None


_ROW = msgspec.json.Decoder(_Row)


def _row(line: bytes) -> Optional[_Row]:
    try:
        return _ROW.decode(line)
    except msgspec.DecodeError:
        pass
    with contextlib.suppress(ValueError, TypeError, KeyError):    # what msgspec refuses
        d = json.loads(line)
        return _Row(int(d["id"]), d.get("status"), d.get("output_tokens"))
    return None


class Follower:
    """Reads the part files as they grow, for a live progress display (sends, records). Only
    id, status and output_tokens are decoded (msgspec skips the chunk lists): this runs in
    the loadgen CLI, which shares its CPU with the senders during the run."""

    def __init__(self, d: Path):
        self.dir = d
        self.pos: dict[Path, int] = {}
        self.tails: dict = {}

    def _new_rows(self, pattern: str) -> list[_Row]:
        out = []
        for f in sorted(self.dir.glob(pattern)):
            try:
                with open(f, "rb") as fh:
                    fh.seek(self.pos.get(f, 0))
                    data = fh.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1          # a line still being written waits
            self.pos[f] = self.pos.get(f, 0) + end
            out += [r for r in map(_row, data[:end].splitlines()) if r is not None]
        return out

    def _new_arrow_rows(self) -> list[_Row]:
        """The same of records.worker-*.arrow (output.records: arrow): each batch appended
        since the last poll, read once (columnar_parts.Tail)."""
        out = []
        for f in sorted(self.dir.glob("records.worker-*.arrow")):
            if f not in self.tails:
                from analysis.contract.columnar_parts import Tail
                self.tails[f] = Tail(f)
            for b in self.tails[f].poll():
                out += map(_Row, b.column("id").to_pylist(), b.column("status").to_pylist(),
                           b.column("output_tokens").to_pylist())
        return out

    def poll(self, progress) -> None:
        for row in self._new_rows("sent.worker-*.jsonl"):
            progress.on_send(row)
        for row in self._new_rows("records.worker-*.jsonl") + self._new_arrow_rows():
            progress.on_done(row)
