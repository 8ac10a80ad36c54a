"""The hostile answers of servers/hostile/server.py: one coroutine per case.

    CASES[name](req, reader, writer) ─► writes its answer as raw bytes (status line, headers,
        framing, body) ─► True: the connection may serve another request; else it is closed (or
        already reset). STATE: the serving process's case, the redirect target port, the log.
    The pieces each case breaks its own way (a normal chunked SSE stream, a JSON answer, a reset):
        servers/hostile/pieces.py

Cases (the failure kind a client should record; see docs/survives.md):
  normal               a well-behaved chunked SSE stream (role, one token per event, usage, [DONE])
  header_flood         status line, then one endless ``X-Flood: aaaa…`` header in 64 KiB writes
  header_count_flood   status line, then endless small headers ``X-F: a`` in 64 KiB writes
  long_line            one 50 MB SSE data line (a JSON chunk with 50 MB of content), then [DONE]
  long_line_no_newline the same line and the body ends right after it (no newline at all)
  huge_json            a streamed request answered with a 50 MB application/json body
  endless_comments     a never-ending fast stream of ``: x`` comment lines
  endless_tokens       a never-ending fast stream of valid token events (no finish, no [DONE])
  echo_secret_429      429 whose JSON body echoes the Authorization and X-Api-Key headers
  echo_secret_cut      429 whose body is the Authorization header ~80 times over, shifted by 6
                       characters more on each request: a snippet cut anywhere cuts a key copy
  echo_secret_stream   200 SSE with two tokens, then an error event echoing the Authorization
                       header (and an X-Echo-Authorization response header)
  echo_headers_400     400 whose JSON body echoes every request header (X-Auth, Cookie...)
  endless_trailers     a normal chunked stream, then ``0\r\n`` and endless ``X-T: <60 KB>`` trailers
  second_response      a normal answer, then at once a second, unsolicited one on the same socket
  after_done_events    a normal stream, then 2,000 more token events after ``[DONE]``, then its end
  open_after_done      a normal stream up to ``[DONE]``; the message never ends, the socket stays open
  bad_event_open       one token, one event that is not JSON; the socket stays open
  deep_json            a token, then one event holding a 100,000-deep JSON array
  bom_stream           a normal stream that opens with a UTF-8 BOM (the SSE spec strips it)
  interim_storm        endless ``HTTP/1.1 100 Continue`` interim answers, never a final one
  huge_content_length  application/json with Content-Length 99,999,999,999,999, a few bytes, silence
  absurd_usage         a normal stream whose usage says completion_tokens -5 or 10^18 (alternating)
  echo_secret_sut      a normal stream, but /v1/models, /info, /version, /props echo both secret
                       headers in their JSON and in X-Echo-* response headers
  redirect_307         every request: 307 to the same path on a second loopback listener, which
                       records what it got (and answers normally)
  reset                200 SSE, two tokens, then an RST (SO_LINGER 0)
  reset_before_status  the request is read, then an RST before any byte of the answer
  bad_chunk_size       200 chunked, then the chunk size ``zz``
  non_http_reply       an SSH banner instead of an HTTP status line, then close
  short_content_length Content-Length 100000, a few hundred bytes of SSE, then close
  gzip_stream          Content-Encoding: gzip SSE (flushed per event), whatever the request accepts
  deflate_stream       Content-Encoding: deflate (zlib) SSE, the same way
  invalid_utf8         SSE token events whose JSON holds raw bytes that are not UTF-8
  http10_close         HTTP/1.0, no Content-Length, no chunking: the body ends with the socket
  slowloris            a normal answer, one byte per second
  never_answers        the request is read, nothing is ever written
  endless_tokens_1m    endless_tokens, asked for max_tokens 10^6 (no event bound before the timeout)
  running_nan, running_inf, running_text, counter_reset, prefix_hits_over, retry_after_nonascii,
  transcription_invalid_utf8   what a server says, absurd but well-formed: servers/hostile/said.py
"""
from __future__ import annotations

import asyncio
import zlib
from typing import Callable

from servers.hostile.said import CASES_SAID
from servers.hostile.pieces import (BIG, LAST, MODEL, PIECE, STATE, big, chunk, delta, endless, event,
                                    head, json_answer, rst, stream_events)

async def normal(req, reader, writer) -> bool:
    if not req.json().get("stream"):
        n = max(1, min(int(req.json().get("max_tokens") or 16), 256))
        msg = ({"message": {"role": "assistant", "content": " tok" * n}} if req.chat
               else {"text": " tok" * n})
        writer.write(json_answer({"id": "h", "model": MODEL, "choices": [
            {"index": 0, "finish_reason": "length", **msg}],
            "usage": {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8}}))
        return True
    writer.write(head() + b"".join(chunk(e) for e in stream_events(req)) + LAST)
    return True


async def header_flood(req, reader, writer):
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Flood: ")
    await endless(writer, b"a" * PIECE)


async def header_count_flood(req, reader, writer):
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
    await endless(writer, b"X-F: a\r\n" * (PIECE // 8))


async def _long_line(req, writer, newline: bool):
    writer.write(head())
    if req.chat:
        writer.write(chunk(event(delta(req, role=True))))
    pre = b'data: {"id": "h", "choices": [{"index": 0, "delta": {"content": "'
    writer.write(chunk(pre))
    mv = memoryview(big())
    for i in range(0, BIG, PIECE):
        writer.write(chunk(bytes(mv[i:i + PIECE])))
        await writer.drain()
    writer.write(chunk(b'"}, "text": "", "finish_reason": "length"}]}'))
    if newline:
        writer.write(chunk(b"\n\ndata: [DONE]\n\n"))
    writer.write(LAST)
    return True


async def long_line(req, reader, writer):
    return await _long_line(req, writer, True)


async def long_line_no_newline(req, reader, writer):
    return await _long_line(req, writer, False)


async def huge_json(req, reader, writer):
    writer.write(head(ctype="application/json", framing=f"Content-Length: {BIG + 2}") + b'"')
    mv = memoryview(big())
    for i in range(0, BIG, PIECE):
        writer.write(mv[i:i + PIECE])
        await writer.drain()
    writer.write(b'"')
    return True


async def endless_comments(req, reader, writer):
    writer.write(head())
    await endless(writer, chunk(b": x\n" * (PIECE // 4)))


async def endless_tokens(req, reader, writer):
    writer.write(head())
    if req.chat:
        writer.write(chunk(event(delta(req, role=True))))
    await endless(writer, chunk(event(delta(req, " tok")) * 256))


async def echo_secret_429(req, reader, writer):
    writer.write(json_answer({"error": {"message": f"rate limited; you sent {req.secrets()}",
                                        "type": "rate_limit_exceeded"}}, "429 Too Many Requests"))
    return True


async def echo_secret_cut(req, reader, writer):
    shift = STATE["served"] * 6 % 48         # a copy is 47 characters ("Bearer sk-test-" + 32)
    STATE["served"] += 1
    auth = req.headers.get("authorization", "")
    writer.write(json_answer({"error": {"message": "p" * shift + " ".join([auth] * 80)}},
                             "429 Too Many Requests"))
    return True


async def echo_secret_stream(req, reader, writer):
    auth = req.headers.get("authorization", "")
    writer.write(head(extra=f"X-Echo-Authorization: {auth}"))
    evs = ([event(delta(req, role=True))] if req.chat else []) + [event(delta(req, " tok"))] * 2
    evs.append(event({"error": {"message": f"invalid credentials: {auth}", "code": 401}}))
    writer.write(b"".join(chunk(e) for e in evs) + chunk(b"data: [DONE]\n\n") + LAST)
    return True


async def echo_headers_400(req, reader, writer):
    """400 whose JSON body echoes every request header, whatever its name (X-Auth, Cookie...)."""
    said = " ".join(f"{k}: {v}" for k, v in req.headers.items())
    writer.write(json_answer({"error": {"message": f"bad request; you sent {said}"}},
                             "400 Bad Request"))
    return True


async def redirect_307(req, reader, writer):
    loc = f"http://127.0.0.1:{STATE['second_port']}{req.path}"
    writer.write(head("307 Temporary Redirect", f"Location: {loc}", "text/plain",
                      "Content-Length: 0"))
    return True


async def reset(req, reader, writer):
    writer.write(head())
    evs = ([event(delta(req, role=True))] if req.chat else []) + [event(delta(req, " tok"))] * 2
    writer.write(b"".join(chunk(e) for e in evs))
    await writer.drain()
    await asyncio.sleep(0.05)
    await rst(writer)


async def reset_before_status(req, reader, writer):
    await rst(writer)


async def bad_chunk_size(req, reader, writer):
    writer.write(head() + b"zz\r\n" + event(delta(req, " tok")) + b"\r\n")


async def non_http_reply(req, reader, writer):
    writer.write(b"SSH-2.0-OpenSSH_9.6p1 Debian-4\r\nProtocol mismatch.\r\n")


async def short_content_length(req, reader, writer):
    body = b"".join(stream_events(req)[:3])
    writer.write(head(framing="Content-Length: 100000") + body)


async def _compressed(req, writer, name: str, wbits: int):
    writer.write(head(extra=f"Content-Encoding: {name}"))
    z = zlib.compressobj(6, zlib.DEFLATED, wbits)
    for e in stream_events(req):
        writer.write(chunk(z.compress(e) + z.flush(zlib.Z_SYNC_FLUSH)))
    writer.write(chunk(z.flush()) + LAST)
    return True


async def gzip_stream(req, reader, writer):
    return await _compressed(req, writer, "gzip", 16 + zlib.MAX_WBITS)


async def deflate_stream(req, reader, writer):
    return await _compressed(req, writer, "deflate", zlib.MAX_WBITS)


async def invalid_utf8(req, reader, writer):
    evs = stream_events(req)
    bad = [e.replace(b" tok", b" \xff\xfe\xc3(") for e in evs]
    writer.write(head() + b"".join(chunk(e) for e in bad) + LAST)
    return True


async def http10_close(req, reader, writer):
    writer.write(head(framing="", version="HTTP/1.0") + b"".join(stream_events(req)))


async def slowloris(req, reader, writer):
    data = head() + b"".join(chunk(e) for e in stream_events(req)) + LAST
    while True:
        for i in range(len(data)):
            writer.write(data[i:i + 1])
            await writer.drain()
            await asyncio.sleep(1.0)


async def never_answers(req, reader, writer):
    await reader.read()                  # until the client goes away (or the server's lifetime)

async def endless_trailers(req, reader, writer):
    writer.write(head() + b"".join(chunk(e) for e in stream_events(req)) + b"0\r\n")
    await endless(writer, b"X-T: " + b"t" * 60_000 + b"\r\n")


async def second_response(req, reader, writer):
    one = head() + b"".join(chunk(e) for e in stream_events(req)) + LAST
    writer.write(one + one)
    return False


async def after_done_events(req, reader, writer):
    more = event(delta(req, " tok")) * 2000
    writer.write(head() + b"".join(chunk(e) for e in stream_events(req)) + chunk(more) + LAST)
    return True


async def open_after_done(req, reader, writer):
    writer.write(head() + b"".join(chunk(e) for e in stream_events(req)))
    await reader.read()                  # until the client goes away


async def bad_event_open(req, reader, writer):
    writer.write(head() + chunk(event(delta(req, " tok"))) + chunk(b"data: {nope\n\n"))
    await reader.read()


async def deep_json(req, reader, writer):
    deep = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    writer.write(head() + chunk(event(delta(req, " tok"))) + chunk(deep)
                 + chunk(b"data: [DONE]\n\n") + LAST)
    return True


async def bom_stream(req, reader, writer):
    evs = stream_events(req)
    writer.write(head() + chunk(b"\xef\xbb\xbf" + evs[0]) + b"".join(chunk(e) for e in evs[1:])
                 + LAST)
    return True


async def interim_storm(req, reader, writer):
    await endless(writer, b"HTTP/1.1 100 Continue\r\n\r\n" * 512)


async def huge_content_length(req, reader, writer):
    writer.write(head(ctype="application/json", framing="Content-Length: 99999999999999")
                 + b'{"id": "h", "choices": [')
    await reader.read()


async def absurd_usage(req, reader, writer):
    STATE["served"] += 1
    bad = -5 if STATE["served"] % 2 else 10**18
    usage = event({"id": "h", "object": "chat.completion.chunk", "model": MODEL, "choices": [],
                   "usage": {"prompt_tokens": 8, "completion_tokens": bad}})
    evs = [e for e in stream_events(req) if b'"usage"' not in e]
    writer.write(head() + b"".join(chunk(e) for e in evs[:-1] + [usage, evs[-1]]) + LAST)
    return True


CASES: dict[str, Callable] = {f.__name__: f for f in (
    normal, header_flood, header_count_flood, long_line, long_line_no_newline, huge_json,
    endless_comments, endless_tokens, echo_secret_429, echo_secret_cut, echo_secret_stream,
    redirect_307, reset, reset_before_status, bad_chunk_size, non_http_reply, short_content_length,
    gzip_stream, deflate_stream, invalid_utf8, http10_close, slowloris, never_answers,
    echo_headers_400, endless_trailers, second_response, after_done_events, open_after_done,
    bad_event_open, deep_json, bom_stream, interim_storm, huge_content_length, absurd_usage)}
CASES["echo_secret_sut"] = normal        # its hostility is on the GET paths (servers/hostile/server.py)
CASES["endless_tokens_1m"] = endless_tokens   # asked for max_tokens 10^6 (bench/hostile.py)
CASES.update(CASES_SAID)                 # what a server says: servers/hostile/said.py
