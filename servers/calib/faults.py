"""Injected faults: what a broken server does mid-stream, after ``fault_at`` content chunks.

    http500 | http429   an HTTP error before any byte of the stream (in handler.py)
    drop                the socket aborted (no more bytes, no [DONE])
    malformed           a line that is not server-sent events
    bad_json            a data event whose JSON does not parse
    error_event         an OpenAI-style ``{"error": ...}`` event, then [DONE]
    noise               valid but unusual SSE: a comment, id, retry, empty data, CRLF line ends
    stall               no byte for ``stall_s`` seconds, then the stream goes on
    no_done             the stream ends without [DONE] (in handler.py)
"""
from __future__ import annotations

import asyncio

from servers.calib.chunks import DONE, event, now_ns

FAULTS = ("http500", "http429", "drop", "malformed", "bad_json", "stall", "error_event", "no_done",
          "noise")


async def inject(fault: str, c: dict, request, resp, log: list) -> bool:
    """Write ``fault`` into the stream; True when the response must end here."""
    if fault == "drop":
        if request.transport is not None:
            request.transport.abort()
        return True
    if fault == "malformed":
        log.append([now_ns(), 0])
        await resp.write(b"this line is not server-sent events\n\n")
    elif fault == "bad_json":
        log.append([now_ns(), 0])
        await resp.write(b'data: {"choices": [ not json\n\n')
    elif fault == "error_event":
        log.append([now_ns(), 0])
        await resp.write(event({"error": {"object": "error", "message": "calibration error event",
                                          "type": "InternalServerError", "code": 500}}))
        await resp.write(DONE)
        await resp.write_eof()
        return True
    elif fault == "noise":
        await resp.write(b": keep-alive\r\n\r\nid: 1\r\nretry: 50\r\ndata:\r\n\r\n")
    elif fault == "stall":
        await asyncio.sleep(float(c["stall_s"]))
    return False
