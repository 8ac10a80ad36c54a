"""What records.jsonl says, checked on read: request ids, time order, token counts (vectorised).

    RecordTable (records.read_table) ─► record_faults(table, slack_ns) ─► Faults
        (bad: one bool per record; rules: [(count, "3 records with end before send"), ...])
        ─► analysis.metrics.summary.load_run: a faulty record is excluded from every figure
        ─► analysis.metrics.summary.summarize_run: the verdict INVALID, one reason per rule

A record is faulty (a writer never produces it; a hand edit or a corrupted file does) when:

* ids: it has no id, a negative id, or the id of an EARLIER line (the first line keeps it);
* time order (integer ns, compared only where both stamps are present): sent before scheduled,
  first chunk before send, end before send, end before first chunk, first token before first
  chunk or after end, a chunk time below the previous chunk's, a chunk before send or after end;
* tokens: a token count (TOKEN_FIELDS, a chunk's n_tokens) negative or above TOKENS_MAX.

``slack_ns``: kernel receive stamps (meta ``client_transport.stamp_source`` kernel / mixed or
not recorded) are REALTIME minus a measured offset, so a stamp may sit up to KERNEL_SLACK_NS off
the user-space ones (loadgen.client.kernel_stamps.FUTURE_SLACK_NS); user stamps get none.
Pure: numpy only; the result is cached on the table (one check per read).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Optional

import numpy as np

from analysis.contract.records import RecordTable

TOKENS_MAX = 10_000_000     # tokens in one request or answer: above every served context window
KERNEL_SLACK_NS = 2_000_000
TOKEN_FIELDS = ("prompt_tokens", "output_tokens", "usage_output_tokens", "chunk_output_tokens",
                "reasoning_tokens", "cached_tokens", "requested_output_tokens",
                "workload_prompt_tokens")
# (later stamp, earlier stamp, what a record that breaks it is called)
ORDER = (("sent_at_ns", "scheduled_at_ns", "sent before scheduled"),
         ("first_chunk_at_ns", "sent_at_ns", "first chunk before send"),
         ("end_at_ns", "sent_at_ns", "end before send"),
         ("end_at_ns", "first_chunk_at_ns", "end before first chunk"),
         ("first_token_at_ns", "first_chunk_at_ns", "first token before first chunk"),
         ("end_at_ns", "first_token_at_ns", "first token after end"))


@dataclass
class Faults:
    """The faulty records of one table: ``bad`` (one bool per record) and per rule its count."""
    bad: np.ndarray
    rules: list[tuple[int, str]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return int(self.bad.sum())

    def reasons(self) -> list[str]:
        """'3 records with end before send', one per rule broken."""
        return [(f"{n} {what}" if what.startswith("duplicate") else f"{n} record{{s}} with {what}")
                .replace("{s}", "s" if n > 1 else "") for n, what in self.rules]

    def keep(self, records: list) -> list:
        """``records`` (the table's, in order) without the faulty ones."""
        return [r for r, b in zip(records, self.bad.tolist()) if not b]


def slack_for(meta: dict) -> int:
    """KERNEL_SLACK_NS unless meta says every stamp was taken in user space."""
    src = ((meta or {}).get("client_transport") or {}).get("stamp_source")
    return 0 if src == "user" else KERNEL_SLACK_NS


def record_faults(table, slack_ns: int = 0) -> Faults:
    """The records of ``table`` (analysis.contract.records.RecordTable) that break a rule of
    the module docstring (cached on the table per ``slack_ns``)."""
    cache = table.__dict__.setdefault("_faults", {})
    if slack_ns not in cache:
        cache[slack_ns] = _check(table, slack_ns)
    return cache[slack_ns]


def _check(t, slack: int) -> Faults:
    n = len(t)
    out = Faults(np.zeros(n, bool))
    if not n:
        return out

    def rule(mask: np.ndarray, what: str) -> None:
        k = int(mask.sum())
        if k:
            out.rules.append((k, what))
            out.bad |= mask

    _ids(t, n, rule)
    stamps = {name: t.stamp(name) for name in {x for a, b, _ in ORDER for x in (a, b)}}
    for later, earlier, what in ORDER:
        (v1, ok1), (v0, ok0) = stamps[later], stamps[earlier]
        rule(ok1 & ok0 & (v1 + slack < v0), what)
    tok = np.zeros(n, bool)
    recs = t.records
    for name in TOKEN_FIELDS:                       # few distinct values: checked as a set
        if getattr(t, "columnar", False):           # records.arrow: integers by its schema
            v, ok = t.stamp(name)
            tok |= ok & ((v < 0) | (v > TOKENS_MAX))
            continue
        seen = set(map(attrgetter(name), recs)) if type(t) is RecordTable \
            else set(t._values(name))               # (a read table: Records, no list built)
        wrong = {v for v in seen if v is not None and not 0 <= v <= TOKENS_MAX}
        if wrong:
            tok |= np.fromiter((v in wrong for v in t._values(name)), bool, count=n)
    ct, cn, offsets = t.t, t.n, t.offsets
    if cn.size and (cn.min() < 0 or cn.max() > TOKENS_MAX):
        tok[_owner(offsets, np.flatnonzero((cn < 0) | (cn > TOKENS_MAX)))] = True
    rule(tok, f"a token count negative or above {TOKENS_MAX:,}")
    if ct.size:
        back = np.zeros(n, bool)
        at = np.flatnonzero(ct[1:] + slack < ct[:-1])          # a drop: inside one record?
        own = _owner(offsets, at)
        back[own[own == _owner(offsets, at + 1)]] = True
        rule(back, "chunk times out of order")
        has = np.diff(offsets) > 0                  # in order: the first and last chunk say it
        first, last = np.zeros(n, np.int64), np.zeros(n, np.int64)
        first[has], last[has] = ct[offsets[:-1][has]], ct[offsets[1:][has] - 1]
        (sv, sok), (ev, eok) = stamps["sent_at_ns"], stamps["end_at_ns"]
        rule(has & ((sok & (first + slack < sv)) | (eok & (last > ev + slack))),
             "a chunk before send or after end")
    return out


def _owner(offsets: np.ndarray, chunk_idx: np.ndarray) -> np.ndarray:
    """The record of each chunk index (offsets: the table's, one more than its records)."""
    return np.searchsorted(offsets, chunk_idx, side="right") - 1


def _ids(t, n: int, rule) -> None:
    """No id, a negative id, an earlier line's id (the set first: the common case is clean)."""
    if getattr(t, "columnar", False):               # records.arrow: the column, no set
        v, ok = t.stamp("id")
        if ok.all() and (not n or (v.min() >= 0 and (
                np.bincount(v).max() == 1 if v.max() < 8 * n + 1024 else
                np.unique(v).size == n))):                     # ids 0..N: counted, not sorted
            return
    else:
        seen = set(t._values("id"))
        if len(seen) == n and None not in seen and min(seen) >= 0:
            return
    ids = t.column("id", float)
    rule(np.isnan(ids), "no request id")
    rule(ids < 0, "a negative request id")
    order = np.argsort(np.where(np.isnan(ids), -1.0, ids), kind="stable")
    s = ids[order]
    again = np.zeros(n, bool)
    again[order[1:]] = s[1:] == s[:-1]              # a later line with an earlier line's id
    rule(again, "duplicate request id{s} (a later line repeats an earlier line's id)")


def planned_excess(measured_ids: np.ndarray, planned: Optional[int]) -> Optional[str]:
    """'45 measured records for 40 planned' when there are more distinct measured request ids
    than the plan holds; None when not (or the plan has no fixed count)."""
    k = int(np.unique(measured_ids).size)
    if planned is None or k <= planned:
        return None
    return f"{k} measured records for {planned} planned"
