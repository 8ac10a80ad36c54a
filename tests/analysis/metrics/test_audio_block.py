"""analysis.metrics.audio: RTFx over the window and per request; None (with a reason) when the
data is missing; no block at all for a run without audio."""
from analysis.metrics.audio import audio_block


def rec(i, sent, end, audio=2.0, status="ok", phase="measured"):
    return {"id": i, "phase": phase, "status": status, "sent_at_ns": sent, "end_at_ns": end,
            "input_audio_s": audio}


def test_rtfx_is_audio_seconds_per_window_second_and_per_request_audio_over_e2e():
    recs = [rec(0, 0, 10**9, phase="warmup"),
            rec(1, 1 * 10**9, 2 * 10**9),             # 2 s of audio in 1 s: 2x
            rec(2, 1 * 10**9, 1_500_000_000),         # 2 s in 0.5 s: 4x
            rec(3, 2 * 10**9, 3 * 10**9, status="error")]
    meta = {"workload": {"audio": {"seconds": 2.0, "sample_rate": 16000, "format": "wav",
                                   "pool": 4}}}
    a = audio_block(recs, meta)
    assert a["rtfx"] == 4.0 / 2.0                     # 4 s of audio done over the 2 s window
    assert a["rtfx_per_request"]["min"] == 2.0 and a["rtfx_per_request"]["max"] == 4.0
    assert (a["requests"], a["requests_sent"], a["audio_s_total"]) == (2, 3, 4.0)
    assert (a["sample_rate"], a["pool"]) == (16000, 4) and a["rtfx_reason"] is None


def test_no_completed_request_gives_none_with_a_reason_and_no_audio_gives_no_block():
    a = audio_block([rec(1, 0, 10**9, status="error")], {})
    assert a["rtfx"] is None and a["rtfx_per_request"] is None and a["audio_s_total"] is None
    assert a["rtfx_reason"] == "no completed request with audio"
    assert audio_block([rec(1, 0, 10**9, audio=None)], {}) is None
