"""client: one HTTP request in, one Record out, every byte stamped on one clock.

    RequestSpec ─► request.py (body, headers; pure rules shared with the Locust user)
                ─► client.py (aiohttp session; POST; read bytes; stamp each read with perf_counter_ns;
                              a stale reused keep-alive connection: sent once more on a fresh one)
                       └► sse.py (pure incremental SSE parser: bytes ─► events ─► token tally)
                ─► Record (loadgen.record) ─► back to run/dispatch.py
    eventloop.py   asyncio (default) or uvloop
    clientload.py  is the client itself the bottleneck? (process CPU, event-loop lag, GC held off)

May import: aiohttp, loadgen.record. Never run/, targets/ or analysis/: nothing slow runs on the
interpreter that stamps chunks.
"""
