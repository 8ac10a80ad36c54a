"""Figures of a transcription run (``api.endpoint: transcriptions``, ``workload.audio``), from its records.

    records with "input_audio_s" (seconds of audio each request sent) ─► audio_block():
        rtfx              Σ input_audio_s of completed measured requests / the run's window (s):
                          audio seconds transcribed per wall-clock second, the whole server's
                          throughput RTFx (100: a hundred seconds of audio done per second)
        rtfx_per_request  input_audio_s / E2E (end_at − sent_at, s) of each completed measured
                          request: how much faster than real time ONE request was served
                          (stats: mean, p50, p90, p99, min, max, count; min is the slowest)
        audio_s_total, audio_s_per_request, requests (completed), requests_sent (measured with
        audio), seconds / sample_rate / format / pool (meta.json workload.audio)

TTFT, TPOT/ITL, E2E and output tokens/s are the usual figures (the first text delta is the first
token). Each figure is None with ``rtfx_reason`` when its data is missing (no completed request,
no window); the block itself is None for a run that sent no audio. Pure.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.meta import AudioShape, RunMeta
from analysis.contract.timing import e2el_ms
from analysis.metrics import figures as m

RTFX_RULE = ("rtfx = Σ input_audio_s of completed measured requests / window (s); "
             "rtfx_per_request = input_audio_s / (end_at − sent_at) of each")
STAT_FIELDS = ("mean", "p50", "p90", "p99", "min", "max", "count")


def audio_block(records: list, meta: Optional[dict]) -> Optional[dict]:
    meas = m.measured(records)
    vals = m.field(meas, "input_audio_s")
    if vals.count(None) == len(vals):               # not a transcription run (at C speed)
        return None
    sent = [r for r, v in zip(meas, vals) if v is not None]
    done = m.completed(sent)
    total = float(sum(r.input_audio_s for r in done))
    d = m.duration_s(m.window(records))
    per = []
    for r in done:
        e = e2el_ms(r)
        if e is not None and e > 0:
            per.append(r.input_audio_s / (e / 1e3))
    s = m.stats(per)
    reason = None
    if not done:
        reason = "no completed request with audio"
    elif not d:
        reason = "no measured window (no request was sent and ended)"
    wl = RunMeta.read(meta).workload
    shape = (wl.audio if wl else None) or AudioShape()
    return {"rtfx": total / d if done and d else None,
            "rtfx_reason": reason,
            "rtfx_per_request": {k: s[k] for k in STAT_FIELDS} if per else None,
            "audio_s_total": total if done else None,
            "audio_s_per_request": total / len(done) if done else None,
            "requests": len(done), "requests_sent": len(sent),
            "seconds": shape.seconds, "sample_rate": shape.sample_rate,
            "format": shape.format, "pool": shape.pool,
            "rule": RTFX_RULE}
