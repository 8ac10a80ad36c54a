"""A run directory for notebooks: typed files and pandas tables (``loadgen.open_run(path)``).

    run_dir ─► open_run(path) ─► RunData
        .meta / .sut / .server   RunMeta / Sut / ServerLife (None when the file is absent)
        .summary                 Summary: summary.json, or computed by analysis.metrics.summary
                                 (the same function the run used) when absent or older
        .records()               DataFrame, one row per request (index: id)
        .chunks()                DataFrame, one row per streamed chunk

Times in the tables are milliseconds from the run's t0 (meta ``t0_ns``, the start of the measured
phase; warm-up requests have negative times). ``t0_source`` says where t0 came from.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Optional

from analysis.contract.base import SCHEMA_VERSION
from analysis.contract.meta import RunMeta
from analysis.contract.rundir import read_meta, read_server, read_summary, read_sut
from analysis.contract.summary import Summary
from analysis.contract.target import ServerLife, Sut
from analysis.metrics import metrics as m

STAMPS = ("scheduled_at_ns", "sent_at_ns", "first_chunk_at_ns", "first_token_at_ns",
          "first_answer_at_ns", "end_at_ns", "first_sent_at_ns")
DERIVED = {"ttft_ms": m.ttft_ms, "ttft_from_scheduled_ms": m.ttft_from_scheduled_ms,
           "tpot_ms": m.tpot_ms, "e2el_ms": m.e2el_ms,
           "e2el_from_scheduled_ms": m.e2el_from_scheduled_ms, "schedule_lag_ms": m.schedule_lag_ms}
SKIP = ("chunks", "output_text")


def _ms_name(stamp: str) -> str:
    return stamp.replace("_at_ns", "_ms")          # sent_at_ns -> sent_ms


class RunData:
    """One run directory, read through the contract (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not (self.path / "records.jsonl").is_file():
            raise FileNotFoundError(f"{self.path}: no records.jsonl (not a run directory?)")
        self.meta: Optional[RunMeta] = read_meta(self.path)
        self.sut: Optional[Sut] = read_sut(self.path)
        self.server: Optional[ServerLife] = read_server(self.path)

    def __repr__(self) -> str:
        mode = self.meta.mode if self.meta else None
        return f"RunData({str(self.path)!r}, mode={mode!r})"

    @cached_property
    def raw_records(self) -> list[dict]:
        """records.jsonl as dicts (the form analysis.metrics reads)."""
        from analysis.metrics.summary import load_run
        return load_run(self.path)[0]

    @cached_property
    def summary(self) -> Summary:
        s = read_summary(self.path)
        if s is not None and s.schema_version == SCHEMA_VERSION:
            return s
        from analysis.metrics.summary import summarize_run   # older or missing: the one function
        return Summary.read(summarize_run(self.path))

    @cached_property
    def _t0(self) -> tuple[Optional[int], str]:
        if self.meta is not None and self.meta.t0_ns is not None:
            return self.meta.t0_ns, "meta.json t0_ns"
        sent = [r["sent_at_ns"] for r in m.measured(self.raw_records)
                if r.get("sent_at_ns") is not None]
        return (min(sent), "first measured send (meta.json has no t0_ns)") if sent else \
            (None, "none (no t0_ns and nothing sent): times are raw nanoseconds / 1e6")

    @property
    def t0_ns(self) -> Optional[int]:
        return self._t0[0]

    @property
    def t0_source(self) -> str:
        return self._t0[1]

    def _ms(self, t: Optional[int]) -> Optional[float]:
        return None if t is None else (t - (self.t0_ns or 0)) / m.NS_PER_MS

    def records(self, phase: Optional[str] = None):
        """One row per request, index ``id``: every scalar field of the record, each
        ``*_at_ns`` stamp as ``*_ms`` from t0, and the per-request figures of
        analysis.metrics (ttft_ms, tpot_ms, e2el_ms, ...; NaN where undefined).
        ``phase``: "measured" or "warmup" to keep only those."""
        import pandas as pd
        rows = []
        for r in self.raw_records:
            if phase is not None and r.get("phase") != phase:
                continue
            row = {k: v for k, v in r.items() if k not in SKIP and k not in STAMPS}
            row.update({_ms_name(k): self._ms(r.get(k)) for k in STAMPS})
            row.update({k: f(r) for k, f in DERIVED.items()})
            row["n_chunks"] = len(r.get("chunks") or ())
            rows.append(row)
        df = pd.DataFrame(rows)
        if df.empty:
            return df
        ms = [c for c in df.columns if c.endswith("_ms")]
        return df.astype({c: float for c in ms}).set_index("id").sort_index()

    def chunks(self, phase: Optional[str] = None):
        """One row per streamed data event: ``id``, ``phase``, ``index`` (0-based in its
        request), ``t_ms`` (arrival, from t0), ``n_tokens`` (0: role-only / usage-only),
        ``since_sent_ms`` and ``gap_ms`` (from the request's previous chunk; NaN for the first)."""
        import pandas as pd
        cols = ("id", "phase", "index", "t_ms", "n_tokens", "since_sent_ms", "gap_ms")
        rows = []
        for r in self.raw_records:
            if phase is not None and r.get("phase") != phase:
                continue
            sent, prev = r.get("sent_at_ns"), None
            for i, (t, n) in enumerate(r.get("chunks") or ()):
                rows.append((r.get("id"), r.get("phase"), i, self._ms(t), n,
                             None if sent is None else (t - sent) / m.NS_PER_MS,
                             None if prev is None else (t - prev) / m.NS_PER_MS))
                prev = t
        return pd.DataFrame(rows, columns=list(cols)).astype(
            {"t_ms": float, "since_sent_ms": float, "gap_ms": float})


def open_run(path: str | Path) -> RunData:
    """The run directory at ``path`` for notebooks (see the module docstring)."""
    return RunData(path)
