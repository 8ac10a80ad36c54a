"""workload.audio: synthetic speech-like clips for api.endpoint transcriptions, seeded, made locally.

    Audio {seconds, sample_rate, format, pool} + workload.seed
        ─► AudioPool: ``pool`` distinct clips, made once before the run: a few seeded tones
           (100-1000 Hz) under a slow syllable-rate envelope, plus seeded noise at -30 dB;
           mono, 16-bit PCM ─► a WAV file's bytes (RIFF header + samples, numpy + stdlib ``wave``)
        ─► AudioPool.for_request(k): request k's clip, dealt in turn (clip k mod pool)
    Clip(key, data, seconds, format): what a request carries; the client builds its multipart
        body once per clip (loadgen.client.multipart) and sends those bytes every time

Pure given the seed: the same scenario makes the same bytes, so every --procs child and Locust
worker builds the same pool. ``probe_clip()``: the short clip the probe request sends. The
workload's text prompt is not sent (a transcription's input is the audio); the record's
``input_audio_s`` is the clip's length, the RTFx figures' numerator (analysis/metrics/audio.py).
"""
from __future__ import annotations

import io
import wave
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Optional

import numpy as np
from pydantic import Field, field_validator

from loadgen.scenario.strict import Strict

SAMPLE_RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
MAX_SECONDS = 600.0                      # one clip: 10 min (48 kHz: 58 MB of PCM), bounded
MIME = {"wav": "audio/wav"}


class Audio(Strict):
    """workload.audio: one synthetic clip of ``seconds`` per request (api.endpoint transcriptions),
    ``pool`` distinct clips made once and dealt out in turn."""

    seconds: float = Field(5.0, gt=0, le=MAX_SECONDS)
    sample_rate: int = 16000
    format: Literal["wav"] = "wav"
    pool: int = Field(8, ge=1, le=64)

    @field_validator("sample_rate")
    @classmethod
    def _rate(cls, v: int) -> int:
        if v not in SAMPLE_RATES:
            raise ValueError(f"expected one of {', '.join(map(str, SAMPLE_RATES))} (Hz), got {v}")
        return v


@dataclass(frozen=True)
class Clip:
    key: int                 # its index in the pool (-1: the probe's); the client's body cache key
    data: bytes              # the encoded file (WAV)
    seconds: float           # audio length: samples / sample_rate
    format: str = "wav"

    @property
    def filename(self) -> str:
        return f"clip{self.key}.{self.format}"


def make_wav(seed: int, k: int, seconds: float, rate: int) -> tuple[bytes, float]:
    """Clip ``k`` of the pool seeded by ``seed``: (WAV bytes, exact length in seconds)."""
    rng = np.random.default_rng([seed, 7, k])
    n = max(1, int(round(seconds * rate)))
    t = np.arange(n, dtype=np.float64) / rate
    x = np.zeros(n)
    for f in rng.uniform(100.0, 1000.0, size=3):
        x += np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
    env = 0.55 + 0.45 * np.sin(2 * np.pi * rng.uniform(2.0, 5.0) * t)   # syllable-rate swell
    x = 0.25 * x * env / 3 + 0.03 * rng.standard_normal(n)
    pcm = (np.clip(x, -1.0, 1.0) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue(), n / rate


class AudioPool:
    """The pool of one workload's clips, made at construction (before any request is sent)."""

    def __init__(self, spec: Audio, seed: int):
        self.spec = spec
        clips = []
        for k in range(spec.pool):
            data, secs = make_wav(seed, k, spec.seconds, spec.sample_rate)
            clips.append(Clip(k, data, secs, spec.format))
        self.clips = tuple(clips)

    def for_request(self, k: int) -> Clip:
        return self.clips[k % len(self.clips)]

    def describe(self) -> dict:
        s = self.spec
        sizes = [len(c.data) for c in self.clips]
        return {"seconds": s.seconds, "sample_rate": s.sample_rate, "format": s.format,
                "pool": s.pool, "bytes_mean": float(np.mean(sizes)), "bytes_max": max(sizes)}


def pool_for(spec: Optional[Audio], seed: int) -> Optional[AudioPool]:
    return AudioPool(spec, seed) if spec is not None else None


@lru_cache(maxsize=1)
def probe_clip() -> Clip:
    """The probe request's clip: 1 s at 16 kHz (any speech server takes it)."""
    data, secs = make_wav(0, 0, 1.0, 16000)
    return Clip(-1, data, secs, "wav")


def check(sc) -> None:
    """Scenario-wide rules (called by ``Scenario``): workload.audio and api.endpoint
    transcriptions go together; ValueError (one line, naming the key) otherwise."""
    w, a = sc.workload, sc.api
    if (w.audio is not None) != (a.endpoint == "transcriptions"):
        raise ValueError("workload.audio: api.endpoint transcriptions sends one audio clip per "
                         "request and needs workload.audio (and workload.audio needs that "
                         "endpoint): give both or neither")
    if w.audio is None:
        return
    if w.source != "synthetic":
        raise ValueError(f"workload.audio: not with workload.source {w.source} (the clips are "
                         "synthetic; use workload.source synthetic)")
