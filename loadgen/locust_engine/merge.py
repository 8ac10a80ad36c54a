"""Workers' files ─► one records.jsonl with exactly one record per owed request.

    locust/records.worker-i.jsonl   finished requests (flushed per record, so a killed worker's
                                    finished records are all there, save a torn last line)
    locust/sent.worker-i.jsonl      send journal: what each worker started
    plan.expected_ids() ∪ journal   every id owed a record (a session turn's journal line keeps
                                    its session_id and turn for the record made here)
        ─► owed ids with no record: status "cancelled", error_kind "cancelled", error
           "worker i died mid-request" / "... before sending it" / "run interrupted ..."
        ─► records.jsonl (RecordWriter), sorted by id

Pure file work (no gevent, no asyncio): the loadgen CLI runs it after the Locust processes end;
``Follower`` tails the same files during the run for the live progress display.
The workers' reports (master.json) merge the same way: ``transport_info`` (meta.json
``client_transport``: every worker's kernel stamping) and ``clock_info`` (meta.json
``locust.clock``: every worker's shift onto the master's clock and its uncertainty).
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Optional

import msgspec

from loadgen.locust_engine.plan import Plan, owner
from loadgen.record import Record, RecordWriter, read_records


def _journal(locust_dir: Path) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for f in sorted(locust_dir.glob("sent.worker-*.jsonl")):
        for row in read_records(f):
            out.setdefault(int(row["id"]), row)
    return out


def _worker_records(locust_dir: Path) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for f in sorted(locust_dir.glob("records.worker-*.jsonl")):
        for r in read_records(f):
            rid = int(r["id"])
            if rid not in out or (out[rid].get("status") != "ok" and r.get("status") == "ok"):
                out[rid] = r
    return out


def _why(rid: int, w: int, status: Optional[str], sent: bool, interrupted: bool) -> str:
    if status in ("dead", "never_ready"):
        what = "died" if status == "dead" else "never became ready"
        return f"worker {w} {what} {'mid-request' if sent else 'before sending it'}"
    if interrupted:
        return ("run interrupted before the request ended" if sent
                else "scheduled but never sent: run interrupted")
    return f"no record from worker {w} ({status or 'no status'}): run ended early"


def merge(locust_dir: Path, out_path: Path, plan: Plan, n_workers: int,
          worker_status: dict[int, str], t0_ns: Optional[int], interrupted: bool,
          end_ns: Optional[int] = None) -> dict:
    """Write ``out_path`` (records.jsonl); return counts for meta.json."""
    recs = _worker_records(locust_dir)
    sent = _journal(locust_dir)
    owed = set(plan.expected_ids()) | set(sent)
    offs = None if plan.sessions else plan.schedule.offsets_ns   # sessions: offsets per session
    made = {"dead": 0, "interrupted": 0, "other": 0}
    for rid in sorted(owed - set(recs)):
        w = owner(rid, plan.warmup, n_workers)
        j = sent.get(rid)
        status = worker_status.get(w)
        sched = j.get("scheduled_at_ns") if j else None
        if sched is None and t0_ns is not None and offs is not None and rid >= plan.warmup:
            sched = t0_ns + int(offs[rid - plan.warmup])
        rec = Record(id=rid, phase="warmup" if rid < plan.warmup else "measured",
                     scheduled_at_ns=sched, sent_at_ns=j.get("sent_at_ns") if j else None,
                     end_at_ns=end_ns, status="cancelled", error_kind="cancelled",
                     error=_why(rid, w, status, j is not None, interrupted),
                     requested_output_tokens=j.get("requested_output_tokens") if j else None,
                     workload_prompt_tokens=j.get("workload_prompt_tokens") if j else None,
                     worker=str(w), session_id=j.get("session_id") if j else None,
                     turn=j.get("turn") if j else None)
        recs[rid] = asdict(rec)
        made["dead" if status in ("dead", "never_ready") else
             "interrupted" if interrupted else "other"] += 1
    names = {f.name for f in fields(Record)}
    with RecordWriter(out_path) as wr:
        for rid in sorted(recs):
            wr.write(Record(**{k: v for k, v in recs[rid].items() if k in names}))
    return {"records": len(recs), "from_workers": len(recs) - sum(made.values()),
            "cancelled_for_dead_workers": made["dead"],
            "cancelled_interrupted": made["interrupted"], "cancelled_other": made["other"],
            "journaled_sends": len(sent)}


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
    """Reads the workers' files as they grow, for a live progress display (sends, records).
    Only id, status and output_tokens are decoded (msgspec skips the chunk lists): this runs
    in the loadgen CLI, which shares its CPU with the Locust processes during the run."""

    def __init__(self, locust_dir: Path):
        self.dir = locust_dir
        self.pos: dict[Path, int] = {}

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
            for line in data[:end].splitlines():
                row = _row(line)
                if row is not None:
                    out.append(row)
        return out

    def poll(self, progress) -> None:
        for row in self._new_rows("sent.worker-*.jsonl"):
            progress.on_send(row)
        for row in self._new_rows("records.worker-*.jsonl"):
            progress.on_done(row)


def transport_info(reports: list) -> dict:
    """meta.json ``client_transport`` of a Locust run: every worker's gwire stamping
    (kstamp.Stamps.describe) and the run's stamp source over all of them."""
    per = {str(x["index"]): x["stamps"] for x in reports if x.get("stamps") and "index" in x}
    sources = {v.get("stamp_source") for v in per.values()}
    source = (None if not sources or None in sources
              else sources.pop() if len(sources) == 1 else "mixed")
    reads = [v.get("reads") or 0 for v in per.values()]
    kernel = [v.get("kernel_stamped_reads") or 0 for v in per.values()]
    return {"transport": "gwire", "stamp_source": source, "reads": sum(reads),
            "kernel_stamped_reads": sum(kernel), "workers": per}


def clock_info(reports: list) -> dict:
    """meta.json ``locust.clock``: each worker's shift onto the master's clock, how it was found
    and its uncertainty (locust_engine/clock.py clock_estimate), and the largest uncertainty."""
    per = {str(x["index"]): x["clock"] for x in reports if x.get("clock") and "index" in x}
    unc = [v.get("uncertainty_ns") for v in per.values()]
    return {"applies_to": "cross-host timeline only (latencies are each worker's own clock)",
            "workers": per,
            "max_uncertainty_ns": (None if not unc or None in unc else max(unc))}
