"""gevent_wire: the gevent driver of the one HTTP/1.1 exchange (the Locust users' client).

    client.py  GWire: one Locust user's keep-alive connection per URL; connect, send, settle
    conn.py    GConn: one socket; recvmsg + kernel receive stamp ─► wire.exchange.Exchange.feed
    reader.py  Reader: ONE reader per worker process (its own epoll), every ready socket read
               before any read is parsed; a user's greenlet wakes once per request

The rules (framing, bounds, keep-alive, settlement, the stream step) are loadgen.client.http1's
exchange.py, loadgen.client.settle and loadgen.client.stream_step, the asyncio driver's too: this package
only reads, stamps, feeds and writes.

May import: gevent, httptools, loadgen.client (sans-I/O modules), loadgen.record. Never asyncio or
aiohttp (Locust's gevent world runs no asyncio code), never loadgen.run/targets/analysis.
"""
