"""A closed wire connection and a reused descriptor number (issue 29 item 2b).

The kernel hands the lowest free number to the next socket, so a connection closed while a
request is on its way has its number taken at once. The old connection's late callbacks (a read,
a resume, an abort, a timer) must never touch the new socket, and a request must never be sent
on a socket that is already closed (that was ``OSError: [Errno 9] Bad file descriptor``, recorded
as the server's ``connection`` fault).
"""
from __future__ import annotations

import asyncio
import socket

import pytest

from loadgen.client.wire.conn import Conn
from loadgen.client.http1.message import WireResponse
from loadgen.client.wire.read_mux import ReadMux
from loadgen.client.wire.pool import WirePool


@pytest.mark.parametrize("kind", ["epoll", "loop"])
def test_late_callbacks_of_a_closed_conn_leave_the_reused_number_alone(kind):
    loop = asyncio.new_event_loop()
    mux = ReadMux(kind)
    mux.open(loop)
    try:
        a, a_peer = socket.socketpair()
        a.setblocking(False)
        old = Conn(a, ("h", 1), loop, mux, None, 4.0, set())
        fd = old.fd
        old.begin(WireResponse())
        ex = old.ex
        a_peer.close()
        old.on_readable()                          # EOF: the exchange fails, the socket closes
        assert old.closed and old.resp.error_kind == "connection"
        b, b_peer = socket.socketpair()            # the lowest free number: the old one
        if fd not in (b.fileno(), b_peer.fileno()):
            pytest.skip("the kernel did not reuse the number")
        new = b if b.fileno() == fd else b_peer
        other = b_peer if new is b else b
        new.setblocking(False)
        got = []
        mux.watch(fd, lambda: got.append(new.recv(10)))
        for late in (old.on_readable, old.resume, lambda: old._abort(old.resp, "protocol", "late"),
                     lambda: old.timed_out(1.0), old.close, lambda: old._grace_over(ex)):
            late()
        other.send(b"x")
        if kind == "epoll":
            ready = [f for f, _ in mux._ep.poll(1.0)]
            assert fd in ready
            mux._on_epoll()
        else:
            loop.run_until_complete(asyncio.sleep(0.05))
            for _ in range(100):
                if got:
                    break
                loop.run_until_complete(asyncio.sleep(0.01))
        assert got == [b"x"]                       # the new socket: still watched, still open
        mux.unwatch(fd, None)
        new.close()
        other.close()
    finally:
        mux.close()
        loop.close()


def test_a_request_is_never_sent_on_a_socket_the_peer_closed_first():
    async def main():
        pool = WirePool()
        pool.open()
        try:
            a, a_peer = socket.socketpair()
            a.setblocking(False)
            conn = Conn(a, ("h", 1), pool._loop, pool.mux, None, 4.0, pool._conns)
            a_peer.close()
            conn.on_readable()                     # idle: the peer's FIN closes it
            assert conn.closed
            resp = WireResponse()
            await pool._exchange(conn, b"POST / HTTP/1.1\r\n\r\n", resp,
                                 pool._loop.time() + 5, None)
            return resp
        finally:
            pool.close()

    resp = asyncio.run(main())
    assert resp.error_kind == "connection" and "Bad file descriptor" not in resp.error, resp.error
    assert "before the request was sent" in resp.error
