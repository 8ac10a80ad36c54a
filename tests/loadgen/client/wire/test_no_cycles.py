"""What a finished exchange leaves behind is freed by reference counting alone: the client holds
the cyclic GC back while it stamps (loadgen.client.gc_hold), so a reference cycle per request
would keep every request's record and chunks in memory until a collection (and make the
collections it postpones long)."""
import asyncio
import gc
import weakref

from loadgen.client.http_client import Client
from loadgen.client.http1.exchange import DONE, Exchange
from loadgen.client.http1.message import WireResponse
from tests.loadgen.client.wire.support import cfg, spec

ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
          b"10\r\ndata: {\"a\": 1}\n\n\r\n0\r\n\r\n")


class _Gone:
    """Collect now, then keep the cyclic GC off until the block ends."""

    def __enter__(self):
        gc.collect()
        self.was = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self.was:
            gc.enable()


def test_an_exchange_that_is_over_holds_no_cycle():
    with _Gone():
        resp = WireResponse()
        ex = Exchange(resp)
        assert ex.feed(1, ANSWER) == DONE
        gone = weakref.ref(resp)
        del ex, resp
        assert gone() is None


def test_requests_through_the_wire_client_leave_no_garbage_cycles(calib_server):
    c = cfg(calib_server, calib={"itl_ms": 0})

    async def run():
        async with Client(c, 2, transport="wire") as client:
            for _ in range(3):                         # warm: the pool's connections exist
                await client.execute(spec(4))
            with _Gone():
                recs = [await client.execute(spec(4)) for _ in range(10)]
                assert all(r.status == "ok" for r in recs)
                del recs
                gc.set_debug(gc.DEBUG_SAVEALL)
                try:
                    gc.collect()
                    kinds = {type(o).__name__ for o in gc.garbage}
                finally:
                    gc.set_debug(0)
                    gc.garbage.clear()
            return kinds

    kinds = asyncio.run(run())
    assert not kinds & {"WireResponse", "Exchange", "HttpResponseParser", "StreamStep", "Record",
                        "StreamTally"}, kinds
