"""The pieces servers/hostile/cases.py breaks its answers from, and what the server reads with.

    STATE                the serving process's case, the redirect target port, the log, a counter
                         of answers, one of /metrics answers
    Request              one parsed request (method, path, lower-cased headers, body)
    head() / chunk() / LAST / event() / delta() / stream_events() / json_answer():
                         a normal answer as raw bytes (status line and headers, chunked framing,
                         SSE events of a chat or completions stream, a JSON body)
    models()             the /v1/models answer
    rst() / endless()    a TCP reset (SO_LINGER 0); one piece written until the client goes away
"""
from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Optional

MODEL = "hostile"
PIECE = 64 * 1024
BIG = 50_000_000                       # the 50 MB line / body
_big: Optional[bytes] = None


def big() -> bytes:
    global _big
    if _big is None:
        _big = b"a" * BIG
    return _big


STATE: dict = {"case": "normal", "second_port": None, "log": [], "served": 0, "metrics_served": 0}


class Request:
    __slots__ = ("method", "path", "headers", "body")

    def __init__(self, method: str, path: str, headers: dict, body: bytes):
        self.method, self.path, self.headers, self.body = method, path, headers, body

    def json(self) -> dict:
        try:
            obj = json.loads(self.body or b"{}")
        except ValueError:
            return {}
        return obj if isinstance(obj, dict) else {}

    @property
    def chat(self) -> bool:
        return "chat" in self.path

    def secrets(self) -> str:
        return (f"Authorization: {self.headers.get('authorization', '')} "
                f"X-Api-Key: {self.headers.get('x-api-key', '')}")


def head(status: str = "200 OK", extra: str = "", ctype: str = "text/event-stream",
         framing: str = "Transfer-Encoding: chunked", version: str = "HTTP/1.1") -> bytes:
    lines = [f"{version} {status}", f"Content-Type: {ctype}", "Server: hostile/1"]
    lines += [x for x in (framing, extra) if x]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(b: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(b), b) if b else b""


LAST = b"0\r\n\r\n"


def event(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def delta(req: Request, text: Optional[str] = None, finish: Optional[str] = None,
          role: bool = False) -> dict:
    if req.chat:
        d = {"role": "assistant"} if role else ({} if text is None else {"content": text})
        choice = {"index": 0, "delta": d, "finish_reason": finish}
        return {"id": "h", "object": "chat.completion.chunk", "model": MODEL, "choices": [choice]}
    choice = {"index": 0, "text": text or "", "finish_reason": finish}
    return {"id": "h", "object": "text_completion", "model": MODEL, "choices": [choice]}


def stream_events(req: Request) -> list[bytes]:
    """A whole normal stream, one item per SSE event."""
    body = req.json()
    n = max(1, min(int(body.get("max_tokens") or 16), 256))
    out = [event(delta(req, role=True))] if req.chat else []
    out += [event(delta(req, " tok")) for _ in range(n)]
    out.append(event(delta(req, finish="length")))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8}
        out.append(event({"id": "h", "object": "chat.completion.chunk", "model": MODEL,
                          "choices": [], "usage": usage}))
    out.append(b"data: [DONE]\n\n")
    return out


def json_answer(obj, status: str = "200 OK", extra: str = "") -> bytes:
    body = json.dumps(obj).encode()
    return head(status, extra, "application/json", f"Content-Length: {len(body)}") + body


def models(extra: dict = None) -> dict:
    return {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "hostile",
                                        **(extra or {})}]}


async def rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def endless(writer: asyncio.StreamWriter, piece: bytes) -> None:
    while True:                          # ends when the client goes away (drain raises)
        writer.write(piece)
        await writer.drain()
        await asyncio.sleep(0)           # drain need not yield: let /hostile/log through
