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

from analysis.report.render import Block, missing, num


def audio_blocks(s: dict) -> list[Block]:
    a = s.get("audio")
    if not isinstance(a, dict):
        return []
    why = a.get("rtfx_reason")
    pr = a.get("rtfx_per_request") or {}
    rows = [["RTFx (audio s transcribed per wall s, whole run)",
             num(a["rtfx"]) if a.get("rtfx") is not None else missing(why), "measured"],
            ["RTFx per request p50 / p90 / slowest",
             " / ".join(num(pr.get(k)) for k in ("p50", "p90", "min")) if pr
             else missing(why, "no completed request with audio"), "measured"],
            ["audio sent (s): total / per request",
             f"{num(a.get('audio_s_total'))} / {num(a.get('audio_s_per_request'))}"
             if a.get("audio_s_total") is not None else missing(why), "measured"],
            ["requests completed / sent with audio",
             f"{a.get('requests')} / {a.get('requests_sent')}", "measured"],
            ["clips (seconds, sample rate, format, pool)",
             ", ".join(str(a.get(k)) for k in ("seconds", "sample_rate", "format", "pool")
                       if a.get(k) is not None) or missing(None, "not recorded"), "configured"]]
    return [("h", "Audio (transcriptions)"),
            ("table", ["figure", "value", "evidence"], rows),
            ("p", f"Rule: {a.get('rule') or 'n/a'}.")]


def audio_line(s: dict) -> Optional[str]:
    a = s.get("audio")
    if not isinstance(a, dict):
        return None
    if a.get("rtfx") is None:
        return f"audio: RTFx {missing(a.get('rtfx_reason'))}"
    pr = a.get("rtfx_per_request") or {}
    return (f"audio: RTFx {num(a['rtfx'])} (audio s per wall s)   per request p50 "
            f"{num(pr.get('p50'))}, slowest {num(pr.get('min'))}   "
            f"{num(a.get('audio_s_total'))} s of audio in {a.get('requests')} requests")
