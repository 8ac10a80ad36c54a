"""Figures of an embeddings run (``api.endpoint: embeddings``), as pure functions of records.

    records with "inputs" (the texts each request sent) ─► embeddings_block():
        latency_ms          E2E (end_at − sent_at) of completed measured requests: p50/p90/p99 …
        request_throughput  completed measured requests / window (req/s)
        input_token_throughput   Σ prompt_tokens of those requests / window (tokens/s)
        input_throughput    Σ inputs of those requests / window (inputs/s)
        inputs_per_request  mean inputs per completed request
        prompt_tokens_source     how the input tokens were counted (usage | workload)

An embeddings answer arrives whole: there is no first token, so TTFT/TPOT/ITL do not exist for
these requests (None, never 0). The window is the run's (figures.window). None where the data is
missing; the block itself is None for a run without embeddings records.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.meta import RunMeta
from analysis.metrics import figures as m
from analysis.contract.record import Record
from analysis.contract.records import Records

LATENCY_FIELDS = ("mean", "p50", "p90", "p99", "max")


def embeddings_records(records: Records) -> list[Record]:
    """Measured records of embeddings requests (those carrying ``inputs``)."""
    meas = m.measured(records)
    vals = m.field(meas, "inputs")
    if vals.count(None) == len(vals):               # not an embeddings run (at C speed)
        return []
    return [r for r, v in zip(meas, vals) if v is not None]


def _sum(recs: Records, key: str) -> Optional[int]:
    vals = m.field(recs, key)
    return None if not vals or any(v is None for v in vals) else int(sum(vals))


def input_token_throughput(records: Records, win) -> Optional[float]:
    """Σ prompt_tokens of completed measured requests / window (tokens/s); None when any
    completed request lacks a count."""
    d = m.duration_s(win)
    n = _sum(m.completed(m.measured(records)), "prompt_tokens")
    return None if d is None or n is None else n / d


def input_throughput(records: Records, win) -> Optional[float]:
    """Σ inputs (texts embedded) of completed measured requests / window (inputs/s); None when
    any completed request lacks the count (not an embeddings record)."""
    d = m.duration_s(win)
    n = _sum(m.completed(m.measured(records)), "inputs")
    return None if d is None or n is None else n / d


def embeddings_block(records: Records, meta: Optional[dict] = None) -> Optional[dict]:
    """The summary's "embeddings" object, or None when the run sent no embeddings request
    (meta's endpoint, else the records' ``inputs``, decides)."""
    recs = embeddings_records(records)
    if not recs and RunMeta.read(meta).endpoint != "embeddings":
        return None
    done = m.completed(recs)
    win = m.window(records)
    lat = m.stats(m.e2el_ms(r) for r in done)
    sources: dict[str, int] = {}
    for r in done:
        k = r.prompt_tokens_source or "missing"
        sources[k] = sources.get(k, 0) + 1
    n_inputs = _sum(done, "inputs")
    return {
        "latency_ms": {k: lat[k] for k in LATENCY_FIELDS} | {"count": lat["count"]},
        "request_throughput": m.request_throughput(records, win),
        "input_token_throughput": input_token_throughput(records, win),
        "input_throughput": input_throughput(records, win),
        "inputs_per_request": None if not done or n_inputs is None else n_inputs / len(done),
        "inputs_total": n_inputs,
        "prompt_tokens_source": dict(sorted(sources.items())),
        "rule": "latency = end_at − sent_at of completed measured requests (one JSON answer: "
                "no TTFT/TPOT/ITL); rates over the run's window",
    }
