"""The gevent side of one request: a Locust user that streams from the OpenAI API.

    Spec ─► body (loadgen.client.request, as loadgen.client.client) ─► FastHttpUser's pooled geventhttpclient
        sent_at_ns ─► headers ─► each socket recv stamped once (perf_counter_ns)
                  ─► stream_step.StreamStep (the native client's step) ─► Record.chunks
        end ─► usage vs chunk counts, status / error_kind (the same rules as the native client)
        ─► one Locust ``request`` event per request (E2E, for Locust's UI only; never a fake
           request per token: loadgen's metrics come from the records)

The stream is read straight from the response's socket, not through ``iter_content`` /
``iter_lines`` (they wait for 1024 bytes, so a 50 ms first token shows at ~95 ms): every
``recv`` is stamped when it returns and whatever it completed is parsed at once.
Body, headers and the record bookkeeping (``fail``, ``finish``, ...) come from
``loadgen.client.request``, the native client's own rules. No asyncio and no aiohttp here (this runs
in a gevent-patched process).

Stale keep-alive sockets, the native client's rule: a request whose kept-alive pooled socket
turns out closed before any byte of the answer (``HTTPConnectionClosed``, a reset or broken
pipe while sending) is sent once more on a fresh socket; the record says so (``retries``,
``first_sent_at_ns``, ``retry_error``), and that user stops reusing sockets from then on.
"""
from __future__ import annotations

import contextlib
import socket
from typing import Any, Optional

import gevent
from geventhttpclient.response import HTTPConnectionClosed
from locust import FastHttpUser, constant, task

from loadgen.record import Record, now_ns
from loadgen.client.request import SNIPPET, apply_body, fail, finish
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import DEFAULT_LIMITS, Limits, StreamStep, body_too_large
from loadgen.client.redirects import REDIRECTS, redirect_message

KEEPALIVE_NS = 4_000_000_000  # idle longer: reconnect (uvicorn drops idle sockets after 5 s)

# the process-wide source of requests (loadgen.locust_engine.node.WorkerNode), set before spawn
NODE: Optional[Any] = None


def _discard(raw) -> None:
    """Close a response's socket that was left mid-body (never back into the pool)."""
    sock, pool = getattr(raw, "_sock", None), getattr(raw, "_pool", None)
    raw._sock = raw._pool = None
    if sock is not None:
        if pool is not None:
            pool.release_socket(sock)
        else:
            sock.close()


def read_stream(raw, rec: Record, tally: StreamTally, limits: Limits = DEFAULT_LIMITS) -> None:
    """An SSE body from a geventhttpclient response into ``rec`` through the one stream step
    (``loadgen.client.stream_step``), one stamp per socket recv."""
    try:
        enc = raw.get("content-encoding")
    except Exception:                    # an HTTPResponse without header access: identity
        enc = None
    step = StreamStep(rec, tally, limits, enc)
    buf = raw._body_buffer               # body bytes the HTTP parser has decoded so far
    t = now_ns()
    try:
        while True:
            if buf:
                data = bytes(buf)
                del buf[:]
                if step.feed(t, data):       # settled: an error event, a protocol fault, a limit
                    return
            elif raw.message_complete:
                break
            else:
                sock = raw._sock
                if sock is None:
                    raise ConnectionError("connection closed mid-stream")
                data = sock.recv(raw.block_size)
                t = now_ns()                 # one stamp per socket read, shared by its events
                if not data:                 # EOF: the end of a close-delimited body, or a drop
                    with contextlib.suppress(Exception):
                        raw.feed(b"")
                    if not raw.message_complete:
                        raise ConnectionError("server closed the connection mid-stream")
                    continue
                raw.feed(data)
    except (ConnectionError, OSError) as e:
        if rec.status == "ok":           # [DONE] arrived: a later drop does not undo it
            return
        return fail(rec, "connection", f"{type(e).__name__}: {e}", now_ns())
    finally:
        if not raw.message_complete:
            _discard(raw)
    step.end(t)


_STALE = (HTTPConnectionClosed, ConnectionResetError, BrokenPipeError)


def _pooled(agent, url: str) -> bool:
    """A kept-alive socket waits in the pool for ``url``: the next request goes out on it."""
    try:
        return not agent.clientpool.get_client(url)._connection_pool._socket_queue.empty()
    except Exception:
        return False


def read_body(raw, rec: Record, tally: StreamTally, limits: Limits = DEFAULT_LIMITS) -> None:
    data = raw.read(limits.max_body_bytes + 1)
    t = rec.end_at_ns = now_ns()
    if len(data) > limits.max_body_bytes:
        if not raw.message_complete:
            _discard(raw)
        return fail(rec, "too_large", body_too_large(len(data), limits) or "too large", t)
    apply_body(rec, tally, data, t)


def _post(agent, url: str, data: bytes, headers: dict):
    """(response, None), or (None, the exception) when no response came; a timeout passes.
    An HTTP error status comes back as its response (``e.response``), not as an exception."""
    try:
        # max_redirects 0: a redirect is answered as the failed request "redirect", never
        # followed to another host with the request's headers (loadgen.client.redirects)
        return agent.urlopen(url, method="POST", payload=data, headers=headers, max_redirects=0), None
    except gevent.Timeout:
        raise
    except Exception as e:
        resp = getattr(e, "response", None)
        return resp, (e if resp is None else None)


def execute(agent, url: str, headers: dict, data: bytes, stream: bool, rec: Record,
            tally: StreamTally, timeout_s: float, limits: Limits = DEFAULT_LIMITS) -> None:
    """POST ``data``; fill ``rec``. Never raises for a failed request (GreenletExit passes)."""
    resp = None
    try:
        with gevent.Timeout(timeout_s):
            reused = _pooled(agent, url)
            rec.sent_at_ns = now_ns()
            resp, err = _post(agent, url, data, headers)
            if err is not None and reused and isinstance(err, _STALE):
                # the server closed the kept-alive socket before it saw the request
                rec.retries += 1
                rec.first_sent_at_ns = rec.sent_at_ns
                rec.retry_error = f"{type(err).__name__}: {err}"[:SNIPPET]
                agent.clientpool.close()        # the other pooled sockets: as stale
                rec.sent_at_ns = now_ns()
                resp, err = _post(agent, url, data, headers)
            if err is not None:
                return fail(rec, "connection", f"{type(err).__name__}: {err}")
            rec.http_status = resp.status_code
            raw = resp._response
            if resp.status_code in REDIRECTS:
                if not raw.message_complete:
                    _discard(raw)
                return fail(rec, "redirect", redirect_message(resp.status_code,
                                                              resp.headers.get("location")))
            if resp.status_code >= 300:
                snippet = raw.read(SNIPPET)[:SNIPPET].decode("utf-8", "replace")
                if not raw.message_complete:
                    _discard(raw)
                return fail(rec, "http", f"HTTP {resp.status_code}: {' '.join(snippet.split())}")
            ctype = (resp.headers.get("content-type") or "").split(";")[0].strip()
            if stream and ctype != "application/json":
                read_stream(raw, rec, tally, limits)
            else:
                read_body(raw, rec, tally, limits)
    except gevent.Timeout:
        if resp is not None and resp._response is not None:
            _discard(resp._response)
        if rec.status == "pending":
            fail(rec, "timeout", f"no complete answer within {timeout_s:g} s")
    except (socket.timeout, TimeoutError):
        if rec.status == "pending":
            fail(rec, "timeout", f"no data for {timeout_s:g} s")
    except (ConnectionError, OSError) as e:
        if rec.status == "pending":
            fail(rec, "connection", f"{type(e).__name__}: {e}")
    except Exception as e:           # a failed request is a record, whatever raised
        if rec.status == "pending":
            fail(rec, "client", f"{type(e).__name__}: {e}")
    finally:
        finish(rec, tally, rec.workload_prompt_tokens)


class LLMUser(FastHttpUser):
    """Takes the next request from ``NODE`` (its worker's slice), sends it, hands back a Record.
    Closed loop in concurrency mode; in server/offline mode NODE paces it to the schedule."""

    wait_time = constant(0)
    host = "http://127.0.0.1"            # NODE sets the scenario's base URL before spawning
    network_timeout = 600.0
    connection_timeout = 30.0
    concurrency = 1                      # one request at a time per user: one connection
    max_retries = 0

    def __init__(self, environment) -> None:
        super().__init__(environment)
        # every status comes back as a response: an error body is read (and its socket closed
        # if unfinished) here, never handed back to the pool half-read
        self.client.client.valid_response_codes = frozenset(range(100, 600))
        self._last_used_ns = now_ns()
        self._reuse = True               # False after a stale-socket retry: a fresh one each time

    @task
    def next_request(self) -> None:
        node = NODE
        if node is None:
            gevent.sleep(0.05)
            return
        node.serve(self)

    def send(self, url: str, headers: dict, data: bytes, stream: bool, rec: Record,
             continuous: bool, timeout_s: float, limits: Limits = DEFAULT_LIMITS) -> None:
        tally = StreamTally(continuous)
        agent = self.client.client
        if not self._reuse or now_ns() - self._last_used_ns > KEEPALIVE_NS:
            agent.clientpool.close()     # never reuse a socket the server may be closing now
        execute(agent, url, headers, data, stream, rec, tally, timeout_s, limits)
        self._last_used_ns = now_ns()
        if rec.retries:
            self._reuse = False
        e2e = ((rec.end_at_ns or now_ns()) - (rec.sent_at_ns or now_ns())) / 1e6
        exc = None if rec.status == "ok" else RuntimeError(f"{rec.error_kind}: {rec.error}")
        self.environment.events.request.fire(
            request_type="POST", name=url.rsplit("/v1", 1)[-1], response_time=e2e,
            response_length=rec.output_chars or 0, exception=exc, context={}, response=None)
