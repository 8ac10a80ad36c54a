"""The report's and the console's view of a transcription run (api.endpoint: transcriptions).

    summary["audio"] (analysis.metrics.audio) ─► audio_blocks: RTFx of the run (audio seconds
        transcribed per wall-clock second) and per request (p50, p90, the slowest), audio
        seconds sent, requests completed / sent with audio, the clips' shape, the rule
                                              ─► audio_line: the same in one console line
Nothing for a run that sent no audio (the block is null); a missing figure is "n/a: REASON"
(summary audio.rtfx_reason), never 0.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.summary import Summary
from analysis.contract.summary_blocks import Spread
from analysis.report.render import Block, missing, num


def audio_blocks(s: dict | Summary) -> list[Block]:
    a = Summary.read(s).audio
    if a is None:
        return []
    why = a.rtfx_reason
    pr = a.rtfx_per_request
    clip = [a.seconds, a.sample_rate, a.format, a.pool]
    rows = [["RTFx (audio s transcribed per wall s, whole run)",
             num(a.rtfx) if a.rtfx is not None else missing(why), "measured"],
            ["RTFx per request p50 / p90 / slowest",
             " / ".join(num(x) for x in (pr.p50, pr.p90, pr.min)) if pr
             else missing(why, "no completed request with audio"), "measured"],
            ["audio sent (s): total / per request",
             f"{num(a.audio_s_total)} / {num(a.audio_s_per_request)}"
             if a.audio_s_total is not None else missing(why), "measured"],
            ["requests completed / sent with audio", f"{a.requests} / {a.requests_sent}",
             "measured"],
            ["clips (seconds, sample rate, format, pool)",
             ", ".join(str(x) for x in clip if x is not None) or missing(None, "not recorded"),
             "configured"]]
    return [("h", "Audio (transcriptions)"),
            ("table", ["figure", "value", "evidence"], rows),
            ("p", f"Rule: {a.rule or 'n/a'}.")]


def audio_line(s: dict | Summary) -> Optional[str]:
    a = Summary.read(s).audio
    if a is None:
        return None
    if a.rtfx is None:
        return f"audio: RTFx {missing(a.rtfx_reason)}"
    pr = a.rtfx_per_request or Spread()
    return (f"audio: RTFx {num(a.rtfx)} (audio s per wall s)   per request p50 "
            f"{num(pr.p50)}, slowest {num(pr.min)}   "
            f"{num(a.audio_s_total)} s of audio in {a.requests} requests")
