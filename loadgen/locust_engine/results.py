"""What the Locust workers leave behind, read by the loadgen CLI (no gevent, no asyncio).

    locust/records.worker-i.jsonl   finished requests (each line whole; a killed worker's
                                    finished records are all there, save a torn last line)
    locust/sent.worker-i.jsonl      send journal: what each worker started
    plan.expected_ids() ∪ journal   every id owed a record, each with its worker
                                    (partition.owner), the journal's fields and its reason:
                                    "worker i died mid-request" / "... before sending it" /
                                    "run interrupted ..." / "no record from worker i ..."
        ─► senders.merge.merge (THE merge of both engines) ─► records.jsonl
    Follower    tails the same files during the run for the live progress display
    transport_info   the workers' reports (master.json) ─► meta.json ``client_transport``
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Optional

import msgspec

from loadgen.record import read_records
from loadgen.run.senders import merge as merge_mod
from loadgen.run.senders.partition import owner
from loadgen.run.senders.plan import Plan


def _journal(locust_dir: Path) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for f in sorted(locust_dir.glob("sent.worker-*.jsonl")):
        for row in read_records(f):
            out.setdefault(int(row["id"]), row)
    return out


def _why(w: int, status: Optional[str], sent: bool, interrupted: bool) -> str:
    if status in ("dead", "never_ready"):
        what = "died" if status == "dead" else "never became ready"
        return f"worker {w} {what} {'mid-request' if sent else 'before sending it'}"
    if interrupted:
        return ("run interrupted before the request ended" if sent
                else "scheduled but never sent: run interrupted")
    return f"no record from worker {w} ({status or 'no status'}): run ended early"


def owed(plan: Plan, n: int, journal: dict[int, dict], status: dict[int, str],
         t0_ns: Optional[int], interrupted: bool) -> list[list]:
    """Each worker's owed requests (merge.Owed, id order): the plan's and what it journaled."""
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


def merge(locust_dir: Path, out_path: Path, plan: Plan, n_workers: int,
          worker_status: dict[int, str], t0_ns: Optional[int], interrupted: bool,
          end_ns: Optional[int] = None) -> dict:
    """Write ``out_path`` (records.jsonl) by the one merge; return counts for meta.json."""
    journal = _journal(locust_dir)
    parts = [locust_dir / f"records.worker-{w}.jsonl" for w in range(n_workers)]
    got = merge_mod.merge(parts, owed(plan, n_workers, journal, worker_status, t0_ns,
                                      interrupted), [""] * n_workers, out_path, end_ns)
    made = {"dead": 0, "interrupted": 0, "other": 0}
    for w, k in enumerate(got["cancelled_by_process"]):
        st = worker_status.get(w)
        made["dead" if st in ("dead", "never_ready") else
             "interrupted" if interrupted else "other"] += k
    return {"records": got["records"], "from_workers": got["from_processes"],
            "cancelled_for_dead_workers": made["dead"],
            "cancelled_interrupted": made["interrupted"], "cancelled_other": made["other"],
            "journaled_sends": len(journal)}


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
    """meta.json ``client_transport`` of a Locust run: every worker's GWire stamping
    (kernel_stamps.Stamps.describe) and the run's stamp source over all of them."""
    per = {str(x["index"]): x["stamps"] for x in reports if x.get("stamps") and "index" in x}
    sources = {v.get("stamp_source") for v in per.values()}
    source = (None if not sources or None in sources
              else sources.pop() if len(sources) == 1 else "mixed")
    reads = [v.get("reads") or 0 for v in per.values()]
    kernel = [v.get("kernel_stamped_reads") or 0 for v in per.values()]
    return {"transport": "gwire", "stamp_source": source, "reads": sum(reads),
            "kernel_stamped_reads": sum(kernel), "workers": per}
