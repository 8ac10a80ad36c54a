"""http1: the pure HTTP/1.1 core every driver shares, sans I/O (no sockets, no asyncio, no gevent).

    message.py    Target (an http:// URL parsed once), request_head (the request's bytes),
                  Ask (the settings: stream?, header / body / hold bounds, load.cancel's hang-up),
                  WireResponse (results only: status, headers, stamped body pieces, the end or
                  the failure), connect_failure (a failed connect's error kind)
    exchange.py   Exchange.feed(t, bytes) / eof(t) ─► GOING | DONE | FAILED | SPILL: framing
                  (content-length, chunked, until close), header / trailer / 1xx / body bounds,
                  keep-alive, stale detection, one message per exchange
    policy.py     ConnPolicy: idle socket TAKE | DROP (keep-alive window, reuse), Connection:
                  close, the one stale resend (and stop-reuse after it), release PARK | CLOSE;
                  deadlines RETURNED for the driver to arm: load.cancel's timed hang-up, [DONE] grace
    redirects.py  the redirect rule and the hop loop (route: api.follow_redirects)

    drivers: loadgen.client.wire (asyncio, kernel stamps), loadgen.client.gevent_wire (Locust
    users), loadgen.client.aiohttp_transport (https: redirects.route, ConnPolicy.stale, the deadlines)
    feed bytes in, arm the deadlines this package returns, stamp reads; they decide nothing.

May import: httptools, the standard library. Nothing of loadgen (tests/loadgen/client/http1
feeds it bytes directly).
"""
