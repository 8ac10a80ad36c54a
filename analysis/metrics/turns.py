"""Figures that multi-turn sessions and reasoning models add, as pure functions of records.

    records with "session_id", "turn" ─► by_turn() ─► per turn index: requests, TTFT p50/p99,
                                                       TPOT p50/p99, prompt tokens mean
    records with "first_answer_at_ns", "reasoning_tokens"
        ─► ttft_answer_ms()   time to the first NON-reasoning output token (GuideLLM's and
                              AIPerf's "time to first output token"), beside TTFT (any token)
        ─► reasoning_block()  both distributions and reasoning vs answer token counts

None where the records do not carry the fields (a single-turn run, a non-reasoning model).
"""
from __future__ import annotations

from typing import Optional

from analysis.metrics import figures as m
from analysis.contract.records import RecordIn, Records, as_record


def ttft_answer_ms(rec: RecordIn) -> Optional[float]:
    """First answer (non-reasoning) token − send time (ms); None if none arrived."""
    rec = as_record(rec)
    t, s = rec.first_answer_at_ns, rec.sent_at_ns
    return None if t is None or s is None else (t - s) / m.NS_PER_MS


def _p(values: list, q: float) -> Optional[float]:
    return m.percentile(values, q)


def by_turn(records: Records) -> Optional[list[dict]]:
    """One object per turn index (1-based) over completed measured records; None without turns."""
    done = [r for r in m.completed(m.measured(records)) if r.turn is not None]
    if not done:
        return None
    out = []
    for turn in sorted({r.turn for r in done}):
        rs = [r for r in done if r.turn == turn]
        ttft = [m.ttft_ms(r) for r in rs]
        tpot = [m.tpot_ms(r) for r in rs]
        prompts = [r.prompt_tokens for r in rs if r.prompt_tokens is not None]
        out.append({"turn": turn, "requests": len(rs),
                    "ttft_ms": {"p50": _p(ttft, 50), "p99": _p(ttft, 99)},
                    "tpot_ms": {"p50": _p(tpot, 50), "p99": _p(tpot, 99)},
                    "prompt_tokens_mean": sum(prompts) / len(prompts) if prompts else None})
    return out


def sessions_block(records: Records) -> Optional[dict]:
    """Session counts: sessions seen, turns completed, turns per session (mean, max)."""
    meas = m.measured(records)
    vals = m.field(meas, "session_id")
    if vals.count(None) == len(vals):               # no sessions (at C speed)
        return None
    recs = [r for r, v in zip(meas, vals) if v is not None]
    per: dict = {}
    for r in recs:
        per.setdefault(r.session_id, []).append(r)
    turns = [len(v) for v in per.values()]
    return {"sessions": len(per), "turns": len(recs),
            "turns_per_session_mean": sum(turns) / len(turns), "turns_per_session_max": max(turns),
            "by_turn": by_turn(records)}


def reasoning_block(records: Records) -> Optional[dict]:
    """TTFT to the first answer token beside TTFT, and token counts, when reasoning was streamed."""
    done = m.completed(m.measured(records))
    vals = m.field(done, "reasoning_tokens")
    if not any(vals):                               # no reasoning streamed (at C speed)
        return None
    rs = [r for r, v in zip(done, vals) if v]
    s = m.stats(ttft_answer_ms(r) for r in done)
    reasoning = sum(r.reasoning_tokens for r in rs)
    answer = sum(max(0, (r.output_tokens or 0) - (r.reasoning_tokens or 0)) for r in done)
    return {"ttft_answer_ms": {k: s[k] for k in ("mean", "p50", "p90", "p99")} | {"count": s["count"]},
            "requests_with_reasoning": len(rs), "reasoning_tokens": reasoning,
            "answer_tokens": answer,
            "rule": "first answer token = first chunk with non-reasoning content; TTFT counts any"}
