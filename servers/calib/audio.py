"""POST /v1/audio/transcriptions: a multipart upload in, a transcript on known deadlines out.

    body (≤ the app's client_max_size) ─► parse_multipart (bounded: ≤ MAX_PARTS parts, part
        headers ≤ MAX_PART_HEADER bytes, text fields ≤ MAX_FIELD bytes; one ``file`` part)
        ─► fields {model, stream, response_format, stream_include_usage, calib (JSON), ...}
        ─► wav_info(file): {bytes, seconds, sample_rate, channels} (stdlib ``wave``; None fields
           when it is not a WAV file)
    settings = the server's DEFAULTS ◄ the form's ``calib`` field (a JSON object): ttft_ms,
        itl_ms, tokens (default 16), text (" tok"), usage, fault http500 | http429, and
        ``format``: the stream's shape
            openai  (default) data: {"type": "transcript.text.delta", "delta"} per token, then
                    {"type": "transcript.text.done", "text", "usage": {type tokens,
                    input_tokens, output_tokens}}                       (OpenAI)
            vllm    data: {"object": "transcription.chunk", "choices": [{"delta": {"content"}}]}
                    per token (the last with finish_reason "length"), the usage chunk when
                    stream_include_usage is true, data: [DONE]          (vLLM)
            text    data: <the token's text> per token, no end marker   (transformers serve)
    content chunk j at arrival + ttft_ms + j*itl_ms (absolute deadlines), each write logged
    [write_ns, n_tokens]; non-streamed: {"text", "usage"} at the last deadline
    input_tokens: 50 per audio second (Whisper's encoder frames after its stride), at least 1

The log entry (GET /calib/log) carries ``audio`` (wav_info) and the text ``fields``.
"""
from __future__ import annotations

import io
import json
import math
import wave
from typing import Any, Optional

from aiohttp import web

from servers.calib.chunks import DONE, SSE_HEADERS, MODEL, event, now_ns
from servers.calib.lockstep import sleep_until

MAX_PARTS = 64
MAX_PART_HEADER = 8 * 2**10
MAX_FIELD = 64 * 2**10
FORMATS = ("openai", "vllm", "text")


class BadForm(ValueError):
    """The upload is not a multipart form this endpoint takes (a 400 naming why)."""


def boundary_of(content_type: str) -> bytes:
    kind, _, params = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        raise BadForm(f"Content-Type {kind.strip()!r}: expected multipart/form-data")
    for p in params.split(";"):
        k, _, v = p.strip().partition("=")
        if k.strip().lower() == "boundary" and v:
            v = v.strip().strip('"')
            if 1 <= len(v) <= 70:
                return v.encode("latin-1")
    raise BadForm("multipart/form-data without a usable boundary")


def _disposition(head: bytes) -> tuple[Optional[str], Optional[str]]:
    """(name, filename) from one part's headers."""
    for line in head.split(b"\r\n"):
        k, _, v = line.decode("latin-1").partition(":")
        if k.strip().lower() != "content-disposition":
            continue
        name = filename = None
        for p in v.split(";")[1:]:
            pk, _, pv = p.strip().partition("=")
            pv = pv.strip().strip('"')
            if pk.lower() == "name":
                name = pv
            elif pk.lower() == "filename":
                filename = pv
        return name, filename
    return None, None


def parse_multipart(body: bytes, content_type: str) -> tuple[dict, Optional[bytes]]:
    """(text fields, the ``file`` part's bytes); BadForm on anything out of bounds or malformed."""
    sep = b"--" + boundary_of(content_type)
    pieces = body.split(sep)
    if len(pieces) < 3 or not pieces[-1].startswith(b"--"):
        raise BadForm("multipart body without its closing boundary")
    if len(pieces) - 2 > MAX_PARTS:
        raise BadForm(f"more than {MAX_PARTS} parts")
    fields: dict = {}
    file: Optional[bytes] = None
    for piece in pieces[1:-1]:
        if not piece.startswith(b"\r\n") or not piece.endswith(b"\r\n"):
            raise BadForm("a part not framed by CRLF")
        head, found, value = piece[2:-2].partition(b"\r\n\r\n")
        if not found or len(head) > MAX_PART_HEADER:
            raise BadForm("a part without headers, or with headers over "
                          f"{MAX_PART_HEADER} bytes")
        name, filename = _disposition(head)
        if not name:
            raise BadForm("a part without Content-Disposition: form-data; name=...")
        if name == "file":
            if file is not None:
                raise BadForm("more than one file part")
            file = value
        elif len(value) > MAX_FIELD:
            raise BadForm(f"field {name!r} over {MAX_FIELD} bytes")
        else:
            fields[name] = value.decode("utf-8", "replace")
    return fields, file


def wav_info(data: bytes) -> dict:
    out: dict = {"bytes": len(data), "seconds": None, "sample_rate": None, "channels": None}
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            rate, frames = w.getframerate(), w.getnframes()
            out.update(sample_rate=rate, channels=w.getnchannels(),
                       seconds=frames / rate if rate else None)
    except (wave.Error, EOFError, ValueError):
        pass
    return out


def _error(msg: str, status: int = 400) -> web.Response:
    return web.json_response({"error": {"message": msg, "code": status}}, status=status)


def _truthy(v: Any) -> bool:
    return str(v).strip().lower() in ("true", "1")


class Transcriber:
    """The endpoint: ``cal`` is the Calibration (its defaults and request log)."""

    def __init__(self, cal: Any):
        self.cal = cal

    async def transcribe(self, request: web.Request) -> web.StreamResponse:
        arrival = now_ns()
        try:
            fields, file = parse_multipart(await request.read(),
                                           request.headers.get("Content-Type", ""))
            if file is None:
                raise BadForm("no 'file' part (the audio upload)")
            if not fields.get("model"):
                raise BadForm("no 'model' field")
            over = json.loads(fields.pop("calib", "{}") or "{}")
            if not isinstance(over, dict):
                raise BadForm("field 'calib' is not a JSON object")
        except (BadForm, ValueError) as e:
            return _error(f"bad upload: {e}")
        c = {**self.cal.defaults, "format": "openai", **over}
        if c["format"] not in FORMATS:
            return _error(f"calib.format: one of {', '.join(FORMATS)}")
        info = wav_info(file)
        self.cal.seq += 1
        entry = {"seq": self.cal.seq, "path": request.path, "prompt": None, "arrival_ns": arrival,
                 "audio": info, "fields": fields, "chunks": [], "fault": c.get("fault")}
        if self.cal.log_on:
            self.cal.log.append(entry)
        if c.get("fault") in ("http500", "http429"):
            status = 500 if c["fault"] == "http500" else 429
            return _error(f"calibration {c['fault']}", status)
        n = int(c["tokens"]) if c.get("tokens") is not None else 16
        text = str(c["text"])
        input_tokens = max(1, math.ceil((info["seconds"] or 0) * 50))
        ttft, itl = c["ttft_ms"] * 1e6, c["itl_ms"] * 1e6
        usage = {"type": "tokens", "input_tokens": input_tokens, "output_tokens": n,
                 "total_tokens": input_tokens + n} if c["usage"] else None
        if not _truthy(fields.get("stream", "false")):
            await sleep_until(arrival + int(ttft + max(n - 1, 0) * itl))
            entry["chunks"].append([now_ns(), n])
            out: dict = {"text": text * n}
            if usage is not None:
                out["usage"] = usage
            return web.json_response(out)
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        want_usage = c["usage"] and _truthy(fields.get("stream_include_usage", "false"))
        try:
            for j in range(n):
                await sleep_until(arrival + int(ttft + j * itl))
                entry["chunks"].append([now_ns(), 1])
                await resp.write(self._delta(c["format"], text, j == n - 1))
            tail = self._tail(c["format"], text * n, usage, want_usage, input_tokens, n)
            if tail:
                entry["chunks"].append([now_ns(), 0])
                await resp.write(tail)
            await resp.write_eof()
        except (ConnectionError, RuntimeError):
            entry["client_gone"] = True
        return resp

    @staticmethod
    def _delta(fmt: str, text: str, last: bool) -> bytes:
        if fmt == "openai":
            return event({"type": "transcript.text.delta", "delta": text})
        if fmt == "vllm":
            return event({"id": "trsc-calib", "object": "transcription.chunk",
                          "created": 1700000000, "model": MODEL,
                          "choices": [{"delta": {"content": text},
                                       "finish_reason": "length" if last else None,
                                       "stop_reason": None}]})
        return b"data: " + text.encode() + b"\n\n"

    @staticmethod
    def _tail(fmt: str, whole: str, usage: Optional[dict], want_usage: bool, pt: int,
              n: int) -> bytes:
        if fmt == "openai":
            done: dict = {"type": "transcript.text.done", "text": whole}
            if usage is not None:
                done["usage"] = usage
            return event(done)
        if fmt == "vllm":
            u = event({"id": "trsc-calib", "object": "transcription.chunk",
                       "created": 1700000000, "model": MODEL, "choices": [],
                       "usage": {"prompt_tokens": pt, "completion_tokens": n,
                                 "total_tokens": pt + n}}) if want_usage else b""
            return u + DONE
        return b""
