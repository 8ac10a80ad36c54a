"""``api.endpoint: responses`` (POST /v1/responses): the OpenAI Responses API's events, counted.

    named SSE events (``event: response.…`` + ``data: {"type": …, "sequence_number": n, …}``)
        ─► stream_step (every event's data, named or not, one Record.chunks entry each)
        ─► ResponsesTally.add_bytes ─► tokens in that event
    a whole (non-streamed) ``object: "response"`` body ─► request.apply_body ─► read_response

``ResponsesTally`` has ``sse.StreamTally``'s interface (``add_bytes``/``add`` return the tokens of
one event, 0 for an event without output, -1 with ``error`` set for an error object; the
usage, finish_reason, chars, text, reasoning, first answer and tool calls it keeps), so the
transports, the stream step and ``request.finish`` treat both alike. The rules, the same as for a
chat chunk:
  * ``response.output_text.delta`` (and ``response.refusal.delta``) with a non-empty ``delta``:
    an ANSWER chunk of 1 token (its text kept with ``want_text``); the first one is TTFT's
    first token, never ``response.created`` (a chunk of 0 tokens: ``first_chunk_at_ns``);
  * ``response.reasoning_text.delta``: a REASONING chunk of 1 token (``reasoning_tokens``);
  * ``response.function_call_arguments.delta``: an answer chunk of 1 token, the piece gathered
    into ``calls`` (``[call_id, name, [pieces]]`` per output item; the name and call_id from
    ``response.output_item.added``, the whole arguments from ``response.output_item.done``);
  * ``response.completed`` / ``response.incomplete`` (or vLLM's ``response.completed`` whose
    ``status`` is ``incomplete``): ``usage.input_tokens`` / ``output_tokens`` → prompt /
    completion tokens; finish_reason ``stop`` (completed), ``length`` (incomplete_details.reason
    ``max_output_tokens``) or the reason as given;
  * ``response.failed`` (its ``response.error``), ``{"type": "error"}`` and ``{"error": …}``:
    -1, ``error`` set (``request.end_stream`` then fails the record as ``server_error``;
    ``event: error`` is the stream step's own rule);
  * every other event (created, in_progress, output_item/content_part added/done, *.done): 0.
The stream ends without ``data: [DONE]`` (OpenAI sends none, nor does vLLM): the terminal event's
finish_reason is what ``request.end_stream`` needs. No I/O.
"""
from __future__ import annotations

from typing import Any, Optional

import msgspec

from loadgen.client.kept import CALL_COST, Budget, KeptText
from loadgen.client.sse import loads

PATH = "/v1/responses"
_INCOMPLETE = {"max_output_tokens": "length"}     # incomplete_details.reason → finish_reason
_ANSWER = ("response.output_text.delta", "response.refusal.delta")
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


class _Event(msgspec.Struct):
    """The fields of one event the tally reads (the rest is skipped by the C decoder)."""
    type: str = ""
    delta: Any = None
    item_id: Optional[str] = None
    item: Any = None
    response: Any = None
    error: Any = None


_decode = msgspec.json.Decoder(_Event).decode


def finish_reason_of(response: dict) -> Optional[str]:
    """The chat finish_reason of a finished response object (None while it is still running)."""
    status = response.get("status")
    if status == "completed":
        return "stop"
    if status == "incomplete":
        why = (response.get("incomplete_details") or {}).get("reason")
        return _INCOMPLETE.get(why, why or "length")
    return None


class ResponsesTally:
    """Counts the output of one Responses API stream (see the module doc)."""

    __slots__ = ("cached_tokens", "prompt_tokens", "completion_tokens", "finish_reason", "chars", "error", "seen",
                 "first_answer", "reasoning_tokens", "text", "want_text",
                 "calls", "_slot", "check", "continuous", "expected", "kept", "calls_over")

    def __init__(self, want_text: bool = False, check: Optional[Any] = None,
                 expected: Optional[Any] = None) -> None:
        self.prompt_tokens: Optional[int] = None
        self.cached_tokens: Any = None          # usage.input_tokens_details.cached_tokens
        self.completion_tokens: Optional[int] = None
        self.finish_reason: Optional[str] = None
        self.chars = 0
        self.error: Optional[Any] = None
        self.seen = 0                                  # events added (Record.chunks entries)
        self.first_answer: Optional[int] = None
        self.reasoning_tokens: Optional[int] = None    # streamed reasoning deltas
        self.want_text = want_text
        self.check = check
        self.expected = expected                       # workload.dataset: graded at finish
        keep = want_text or (check is not None and check.wants_text) or expected is not None
        self.kept = Budget()                           # text + tool calls kept (kept.py)
        self.text: Optional[list] = KeptText(self.kept) if keep else None
        self.calls: Optional[list] = None
        self.calls_over = 0                            # calls past the kept budget (counted)
        self._slot: dict = {}                          # output item id -> its entry in calls
        self.continuous = False                        # no continuous usage in this API

    # ------------------------------------------------------------------ input
    def add_bytes(self, data: bytes) -> int:
        """Tokens in one event's payload; raises ValueError when it is not a JSON object."""
        try:
            ev = _decode(data)
        except msgspec.ValidationError:                # JSON, but not an event object
            return self.add(loads(data))
        return self._tally(ev, data)

    def add(self, obj: Any) -> int:
        if not isinstance(obj, dict):
            raise ValueError(f"a Responses event must be a JSON object, got {type(obj).__name__}")
        try:
            ev = msgspec.convert(obj, _Event)
        except msgspec.ValidationError as e:
            raise ValueError(f"not a Responses event: {e}") from None
        return self._tally(ev, obj)

    def _tally(self, ev: _Event, whole: Any) -> int:
        i = self.seen
        self.seen = i + 1
        kind = ev.type
        if kind in _ANSWER or kind == "response.reasoning_text.delta":
            d = ev.delta
            if not d or d.__class__ is not str:
                return 0
            self.chars += len(d)
            if kind == "response.reasoning_text.delta":
                self.reasoning_tokens = (self.reasoning_tokens or 0) + 1
                return 1
            if self.first_answer is None:
                self.first_answer = i
            if self.text is not None:
                self.text.append(d)
            return 1
        if kind == "response.function_call_arguments.delta":
            entry = self._call(ev.item_id, None)
            if entry is not None and ev.delta and ev.delta.__class__ is str:
                entry[2].append(ev.delta)
                self.chars += len(ev.delta)
            if self.first_answer is None:
                self.first_answer = i
            return 1
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = ev.item
            if isinstance(item, dict) and item.get("type") == "function_call":
                entry = self._call(item.get("id") or item.get("call_id"), item)
                args = item.get("arguments")
                if (entry is not None and kind == "response.output_item.done"
                        and isinstance(args, str) and args):
                    entry[2] = KeptText(self.kept, [args] if self.kept.take(len(args)) else [])
            return 0
        if kind in _TERMINAL:
            resp = ev.response if isinstance(ev.response, dict) else {}
            self._usage(resp.get("usage"))
            if kind == "response.failed" or resp.get("status") == "failed":
                self.error = resp.get("error") or {"message": f"{kind} (no error object)"}
                return -1
            self.finish_reason = finish_reason_of(resp) or ("stop" if kind == "response.completed"
                                                            else "length")
            return 0
        if kind == "error" or (ev.error is not None and not kind.startswith("response.")):
            obj = loads(whole) if whole.__class__ is bytes else whole
            self.error = obj.get("error") or obj
            return -1
        return 0

    def _call(self, item_id: Optional[str], item: Optional[dict]) -> Optional[list]:
        """The entry of call ``item_id``, opened if new; None past the kept budget (counted)."""
        calls = self.calls
        if calls is None:
            calls = self.calls = []
        entry = self._slot.get(item_id)
        if entry is None:
            if not self.kept.take(CALL_COST):
                self.calls_over += 1
                return None
            entry = self._slot[item_id] = [None, None, KeptText(self.kept)]
            calls.append(entry)
        if item is not None:
            entry[0] = item.get("call_id") or entry[0]
            entry[1] = item.get("name") or entry[1]
        return entry

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        if isinstance(usage.get("input_tokens"), int):
            self.prompt_tokens = usage["input_tokens"]
        self.cached_tokens = cached_of(usage, "input_tokens_details")
        if isinstance(usage.get("output_tokens"), int):
            self.completion_tokens = usage["output_tokens"]   # reasoning included, as in chat


def cached_of(usage: Any, key: str) -> Any:
    """usage[key].cached_tokens (``prompt_tokens_details`` in chat/completions answers,
    ``input_tokens_details`` in Responses ones), None when absent; checked at finish."""
    details = usage.get(key) if isinstance(usage, dict) else None
    return details.get("cached_tokens") if isinstance(details, dict) else None


def read_response(tally: Any, obj: dict) -> Optional[str]:
    """A whole ``object: "response"`` body into ``tally`` (usage, text, function calls,
    finish_reason); returns the error message of a failed response, else None."""
    if obj.get("status") == "failed":
        err = obj.get("error") or {}
        return str(err.get("message") or err) if isinstance(err, dict) else str(err)
    usage = obj.get("usage") or {}
    tally.prompt_tokens = usage.get("input_tokens")
    tally.cached_tokens = cached_of(usage, "input_tokens_details")
    tally.completion_tokens = usage.get("output_tokens")
    keep = getattr(tally, "text", None)
    calls = []
    for item in obj.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            for part in item.get("content") or []:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str) and part.get("type") in ("output_text", "refusal", "text"):
                    tally.chars += len(text)
                    if keep is not None:
                        keep.append(text)
        elif item.get("type") == "function_call":
            calls.append([item.get("call_id"), item.get("name"), [item.get("arguments") or ""]])
    if calls and hasattr(tally, "calls"):
        tally.calls = calls
    tally.finish_reason = finish_reason_of(obj) or "stop"
    return None
