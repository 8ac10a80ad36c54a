"""client: one HTTP request in, one Record out, every byte stamped on one clock.

    RequestSpec ─► request.py (body, headers; pure rules shared with the Locust user)
                ─► client.py (Client: picks the transport, builds body and headers, one Record)
                     ├► wire/ (default for http://): WirePool, kernel receive stamp per read
                     │    (SO_TIMESTAMPNS ─► the perf_counter clock), one epoll for every socket,
                     │    httptools framing; the record filled after the reads, in slices
                     └► aiohttp_transport.py (https://, LOADGEN_HTTP=aiohttp): aiohttp session,
                          perf_counter_ns per read as the loop gets it
                     both: a stale reused keep-alive connection is sent once more on a fresh one
                       └► sse.py (pure incremental SSE parser: bytes ─► events ─► token tally,
                                  reasoning vs answer chunks; api.endpoint responses:
                                  responses.py's ResponsesTally over the named events)
                ─► Record (loadgen.record) ─► back to run/dispatch.py
    eventloop.py   asyncio (default) or uvloop
    clientload.py  is the client itself the bottleneck? (process CPU, event-loop lag, GC held off)

May import: aiohttp, httptools, loadgen.record. Never run/, targets/ or analysis/: nothing slow
runs on the interpreter that stamps chunks.
"""
