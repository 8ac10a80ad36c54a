"""client: one HTTP request in, one Record out, every byte stamped on one clock.

    RequestSpec ─► request.py (body, headers; pure rules shared with the Locust user)
                ─► client.py (Client: picks the transport, builds body and headers, one Record)
                     ├► wire/ (default for http://): WirePool, kernel receive stamp per read
                     │    (SO_TIMESTAMPNS ─► the perf_counter clock), one epoll for every socket,
                     │    http1/exchange.py: THE HTTP/1.1 rule set, sans I/O (the Locust users'
                     │    gevent driver feeds it too); the record filled after the reads, in slices
                     └► aiohttp_transport.py (https://, LOADGEN_HTTP=aiohttp): aiohttp session,
                          perf_counter_ns per read as the loop gets it; settled by the same
                          rules (client/settle.py, stream_step.py)
                     both: a stale reused keep-alive connection is sent once more on a fresh one
                     attempt.py: THE attempt loop (send / wait / done; settlement, cancellation,
                     the two Record constructors), stepped by the asyncio Client and the Locust
                     request source; hangup.py (load.cancel: which request hangs up and when;
                     ``aborted``) and retry.py (api.retry, Retry-After): pure rules it applies
                       └► sse_parser.py (pure incremental SSE parser: bytes ─► events), sse.py
                                  (events ─► token tally, re-exports the parser's names,
                                  reasoning vs answer chunks; api.endpoint responses:
                                  responses.py's ResponsesTally over the named events;
                                  api.endpoint transcriptions: multipart.py, the upload's
                                  bytes once per clip, transcriptions.py's TranscriptionTally)
                ─► Record (loadgen.record) ─► back to engine/aio/dispatch.py
    structured.py / accuracy.py  tool calls, JSON answers / a workload.dataset answer, checked
                   once after the stream (Record fields; the text kept only when checked)
    eventloop.py   asyncio (default) or uvloop
    load_monitor.py  is the client itself the bottleneck? (process CPU, event-loop lag, GC held off)

May import: aiohttp, httptools, loadgen.record. Never run/, targets/ or analysis/: nothing slow
runs on the interpreter that stamps chunks.
"""
