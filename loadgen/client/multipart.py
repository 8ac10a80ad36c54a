"""The multipart/form-data body of a transcription request, built once per clip. Pure.

    api settings ─► form_fields (once per run: model, stream, response_format json, vLLM's
                    stream_include_usage / stream_continuous_usage_stats, api.extra_body)
    + one Clip (loadgen.scenario.audio: WAV bytes) ─► encode ─► the body's bytes
    ClipBodies: clip key ─► those bytes, made on the clip's first request and reused after
                (a pool of P clips costs P joins per run; the send path only looks one up)

Field values are text: booleans ``true``/``false``, numbers as written, a list or mapping as
JSON. The boundary is random per run and checked against every part (a clip containing it is
refused: ``ValueError``, the request fails as ``client``).
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterable

MIME = {"wav": "audio/wav"}            # a clip's format ─► its part's Content-Type

REQUIRED = ("model", "stream")


def form_fields(api: Any, model: str, drop: Iterable[str] = ()) -> dict:
    """The text fields of every transcription request (the ``base_body`` of this endpoint)."""
    f: dict = {"model": model, "stream": api.stream, "response_format": "json"}
    if api.stream and api.include_usage:
        f["stream_include_usage"] = True                  # vLLM: the usage chunk at the end
        if api.continuous_usage:
            f["stream_continuous_usage_stats"] = True
    f.update(api.extra_body)
    for name in drop:
        f.pop(name.partition(".")[0], None)
    return f


def text_value(v: Any) -> str:
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def new_boundary() -> str:
    return "loadgen-" + os.urandom(12).hex()


def content_type(boundary: str) -> str:
    return f"multipart/form-data; boundary={boundary}"


def encode(fields: dict, clip: Any, boundary: str) -> bytes:
    """The whole body: one part per field, then the clip as the ``file`` part."""
    sep = f"--{boundary}".encode()
    out = []
    for name, v in fields.items():
        out += [sep, b"\r\n", f'Content-Disposition: form-data; name="{name}"\r\n\r\n'.encode(),
                text_value(v).encode(), b"\r\n"]
    out += [sep, b"\r\n",
            f'Content-Disposition: form-data; name="file"; filename="{clip.filename}"\r\n'
            f"Content-Type: {MIME.get(clip.format, 'application/octet-stream')}\r\n\r\n".encode(),
            clip.data, b"\r\n", sep, b"--\r\n"]
    if any(sep in part for part in out[:-1] if part is not sep):
        raise ValueError("the multipart boundary occurs inside the body; send again")
    return b"".join(out)


class ClipBodies:
    """Clip key ─► the request body's bytes (made once per clip, then looked up)."""

    def __init__(self, fields: dict):
        self.fields = fields
        self.boundary = new_boundary()
        self.content_type = content_type(self.boundary)
        self._bodies: dict = {}

    def body(self, clip: Any) -> bytes:
        if clip is None:
            raise ValueError("api.endpoint transcriptions needs an audio clip (workload.audio)")
        b = self._bodies.get(clip.key)
        if b is None:
            b = self._bodies[clip.key] = encode(self.fields, clip, self.boundary)
        return b
