"""wire: a minimal HTTP/1.1 client for plain ``http://`` targets, every read stamped by the kernel.

    transport.WireTransport.send (client.Client's default transport for http://)
      ─► pool.WirePool.request: an idle keep-alive connection (LIFO) or a connect; a stale pooled
             one retried once, fresh; sent_at_ns immediately before the send syscall
           ─► mux.ReadMux: the pool's own epoll, one loop reader for every socket
           ─► conn.Conn.on_readable (the asyncio driver): recvmsg ─► SCM_TIMESTAMPNS ─► kernel_stamps
                  clock map ─► t ─► http1.exchange.Exchange.feed(t, bytes): THE HTTP/1.1 rule
                  set, sans I/O (httptools framing, header/1xx/trailer bound, EOF, keep-alive,
                  stale, one message, body bound; the Locust client's gevent driver feeds the
                  same class) ─► WireResponse.reads [(t, bytes)]   (loadgen.client.http1.message)
           reuse, keep-alive window, stale resend, stop-reuse, load.cancel's timed hang-up, the [DONE]
           grace: loadgen.client.http1.policy decides and returns deadlines; this driver arms them
           every pool.SWEEP_S (0.25 s) a stream in flight that read nothing since the last
           sweep is parsed (fill.catch_up_steps): one that failed or had its [DONE] on a socket
           left open and quiet ends
      ─► pool.WirePool.fill ─► fill.RecordFiller: fill_steps in slices of <= 250 µs per loop
             turn: SSE, JSON, tokens (sse.py), client/settle.py (status, redirect, whole body,
             the exchange's failure), request.py's record rules ─► Record
    client/kernel_stamps.py   kernel receive stamps on the records' clock (probe, offset, steps,
             per-pool figures): shared with the Locust client's gevent driver, like client/settle.py

No JSON, no SSE and no task switch per read: the loop's only per-read work is one recvmsg, one
clock read (user time, kept to measure how late the loop got to the read) and one parser feed. A
read that coalesced several TCP segments carries the LAST segment's kernel stamp; ``fill`` counts
reads that carried more than one token chunk (``coalesced_reads``). A read without the cmsg
(stamping refused, or a packet that reached the socket before the host turned stamping on) is
stamped in user space; ``stamp_source`` says ``kernel``, ``user`` or ``mixed`` per response and per
pool. Linux gives kernel stamps; elsewhere the same code path stamps in user space.

This package is the asyncio driver only. May import: httptools, loadgen.record,
loadgen.client.http1 / sse / request / stream_step / settle / kernel_stamps. Nothing else of
loadgen; the Locust client (loadgen.client.gevent_wire) never imports it (tests/test_layering.py).
"""
