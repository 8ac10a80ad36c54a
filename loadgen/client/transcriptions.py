"""``api.endpoint: transcriptions`` (POST /v1/audio/transcriptions): the three stream shapes, counted.

    data events ─► stream_step (one Record.chunks entry each) ─► TranscriptionTally.add_bytes
        OpenAI        {"type": "transcript.text.delta", "delta": "…"}   an answer chunk, 1 token
                      {"type": "transcript.text.done", "text": "…", "usage": {input_tokens,
                       output_tokens}}                                   usage; finish_reason stop
                      other typed events (transcript.text.segment, …)   0
        vLLM          {"object": "transcription.chunk", "choices": [{"delta": {"content": "…"},
                       "finish_reason": …}], "usage": …} then [DONE]     sse.StreamTally's rules
        transformers  data: <the text itself> (not JSON), no end marker  a plain-text chunk, 1 token
    a whole (non-streamed) body {"text": "…", "usage"?} ─► request.apply_body ─► read_transcription

The shape is told per event: a payload that starts with ``{`` and parses as a JSON object is an
event (typed OpenAI, chat-like vLLM chunk, or an error object: -1, ``error`` set); anything else is
plain text (transformers serve). Once a JSON event has come, plain text is refused, and once
plain text has come, a JSON object event is refused (a finish event is never a text token); bytes
that are not UTF-8 are refused in either shape, as chat's JSON decoder refuses them (``ValueError``:
``protocol``). A plain-text stream has no end marker: its clean end (the body's framing complete)
ends it ok (``ends_with_body``; ``finish_reason`` stays None: the server said none). No I/O.
"""
from __future__ import annotations

from typing import Any, Optional

from loadgen.client.sse import StreamTally, loads

PATH = "/v1/audio/transcriptions"


class TranscriptionTally(StreamTally):
    """``sse.StreamTally`` plus OpenAI's typed transcript events and plain-text data lines."""

    __slots__ = ("ends_with_body", "json_seen")

    def __init__(self, continuous: bool = False, want_text: bool = False,
                 check: Optional[Any] = None, expected: Optional[Any] = None) -> None:
        super().__init__(continuous, want_text, check, expected)
        self.ends_with_body = False        # plain-text stream (transformers serve): no end marker
        self.json_seen = False

    def add_bytes(self, data: bytes) -> int:
        if data[:1] == b"{":
            try:
                obj = loads(data)
            except ValueError:
                if self.json_seen:
                    raise
                return self._plain(data)
            if self.ends_with_body and obj.__class__ is dict:
                raise ValueError("a JSON event in a plain-text stream")
            if not self.ends_with_body:
                return self.add(obj)
        if self.json_seen:
            raise ValueError("a plain-text event in a stream of JSON events")
        return self._plain(data)

    def add(self, obj: Any) -> int:
        if obj.__class__ is not dict:
            raise ValueError(f"a transcription event must be a JSON object, got "
                             f"{type(obj).__name__}")
        self.json_seen = True
        kind = obj.get("type")
        if kind.__class__ is not str or "choices" in obj:
            return super().add(obj)        # vLLM chunk, error object (StreamTally's rules)
        i = self.seen
        self.seen = i + 1
        if kind == "transcript.text.delta":
            d = obj.get("delta")
            if not d or d.__class__ is not str:
                return 0
            return self._answer(i, d)
        if kind == "transcript.text.done":
            usage_of(self, obj.get("usage"))
            self.finish_reason = "stop"
            return 0
        if kind == "error" or "error" in obj:
            self.error = obj.get("error") or obj
            return -1
        return 0

    def _plain(self, data: bytes) -> int:
        self.ends_with_body = True
        i = self.seen
        self.seen = i + 1
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:   # a ValueError: protocol, as chat's JSON decoder says
            raise ValueError(f"a plain-text event that is not UTF-8 ({e.reason} at byte "
                             f"{e.start})") from None
        return self._answer(i, text)

    def _answer(self, i: int, text: str) -> int:
        self.chars += len(text)
        if self.first_answer is None:
            self.first_answer = i
        if self.text is not None:
            self.text.append(text)
        return 1


def usage_of(tally: Any, usage: Any) -> None:
    """Token usage of a transcription (OpenAI ``input_tokens``/``output_tokens``, or the chat
    names); a duration-only usage (``{"type": "duration", "seconds": n}``) says no tokens."""
    if not isinstance(usage, dict):
        return
    for name, attr in (("input_tokens", "prompt_tokens"), ("prompt_tokens", "prompt_tokens"),
                       ("output_tokens", "completion_tokens"),
                       ("completion_tokens", "completion_tokens")):
        v = usage.get(name)
        if v is not None:
            setattr(tally, attr, v)


def is_transcription(obj: dict) -> bool:
    """A whole transcription answer: ``text`` and none of the other endpoints' keys."""
    return "text" in obj and "choices" not in obj and "data" not in obj and "object" not in obj


def read_transcription(tally: Any, obj: dict) -> None:
    """A whole (non-streamed) transcription body into ``tally``: its text and usage."""
    text = obj.get("text")
    if isinstance(text, str):
        tally.chars += len(text)
        keep = getattr(tally, "text", None)
        if keep is not None:
            keep.append(text)
    usage_of(tally, obj.get("usage"))
