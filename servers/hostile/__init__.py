"""The hostile server: a real HTTP server that misbehaves on purpose (floods, resets, endless trailers,
echoed keys...), one case per path. Used by the test suite (tests/loadgen/client/test_hostile.py) and by
``python -m bench.hostile``; lives here so that both may import it (bench never imports tests/).

    cases.py   CASES: name -> coroutine writing raw bytes to the client's socket
    pieces.py  what the cases are written with: Request, STATE, a normal answer as raw bytes
    server.py  HostileServer (a subprocess on 127.0.0.1), ``python -m servers.hostile.server``

Imports: the standard library and servers.port_server only (servers never import loadgen/analysis).
"""
