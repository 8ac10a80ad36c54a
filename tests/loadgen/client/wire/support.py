"""Shared by the wire tests: request helpers (bodies built as Client builds them) and a raw
asyncio server for what the calibration server cannot do (Connection: close, read-until-close,
bad HTTP, a socket that only drops)."""
import asyncio

from loadgen.client.http_client import Client, ClientConfig, RequestSpec, build_base_body
from loadgen.scenario.workload import PromptSpec
from loadgen.client.request import request_body, request_headers
from loadgen.client.wire.record_fill import fill_record
from loadgen.client.wire.pool import WirePool
from loadgen.record import Record

_ids = iter(range(10**6))

SSE_BODY = (b'data: {"choices":[{"index":0,"text":" a","finish_reason":null}]}\n\n'
            b'data: {"choices":[{"index":0,"text":" b","finish_reason":"length"}]}\n\n'
            b'data: [DONE]\n\n')


def cfg(server, calib=None, **kw):
    extra = dict(kw.pop("extra_body", {}))
    if calib is not None:
        extra["calib"] = calib
    return ClientConfig(base_url=server.url, model="calib-model", extra_body=extra, **kw)


def spec(max_tokens=8):
    i = next(_ids)
    return RequestSpec.of(PromptSpec(f"wire-{i} hello world", 3, max_tokens), i)


def url_of(c: ClientConfig) -> str:
    return c.base_url + ("/v1/chat/completions" if c.endpoint == "chat" else "/v1/completions")


def blank() -> Record:
    return Record(id=0, phase="measured", scheduled_at_ns=None)


async def wire_one(c: ClientConfig, s: RequestSpec, pool: WirePool = None):
    """One request through the wire pool alone, filled at once (``fill_record``)."""
    own = pool is None
    pool = pool or WirePool(limit=4, timeout_s=c.timeout_s)
    if own:
        await pool.__aenter__()
    try:
        body = request_body(build_base_body(c), c.endpoint == "chat", s.prompt, s.max_tokens)
        resp = await pool.request("POST", url_of(c), request_headers(c, c.api_key), body)
    finally:
        if own:
            await pool.__aexit__()
    rec = Client.new_record(s)
    fill_record(resp, rec, stream=c.stream, continuous=c.continuous_usage,
                workload_prompt_tokens=s.prompt_tokens)
    return resp, rec


class RawServer:
    """asyncio.start_server on 127.0.0.1 with a per-test handler; counts connections and EOFs."""

    def __init__(self, handler):
        self.handler = handler
        self.connections = 0
        self.eof = asyncio.Event()

    async def __aenter__(self):
        async def wrapped(reader, writer):
            self.connections += 1
            try:
                await self.handler(self, reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()
        self.server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def wait_eof(self, reader):
        """Read until the client closes (sets ``eof``)."""
        while await reader.read(65536):
            pass
        self.eof.set()


async def read_request(reader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    return head + await reader.readexactly(n)
