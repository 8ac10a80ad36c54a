"""An OTLP/HTTP trace receiver on its own thread: the server's spans in, bounded, off the loop.

    Receiver(port).start() ─► a ThreadingHTTPServer on 127.0.0.1 / host (port 0: any free port;
        ``port`` says which) in daemon threads, never on the sending event loop
    POST /v1/traces  Content-Type application/x-protobuf | application/json
        ─► Content-Length required (411), ≤ max_body_bytes (413, the body never read), read with
           a socket timeout (an endless or stalled body ends in 408) ─► spans.decode (≤ max_spans
           in all; the rest counted) ─► timings[trace_id] = ServerTiming fields | reasons[why]
        ─► 200 with an empty ExportTraceServiceResponse (protobuf) or ``{}`` (JSON)
        ─► with ``raw_path``: the body itself appended to that file as one JSON line
           {"json": bool, "body": base64} while the file stays ≤ raw_max_bytes (the rest counted
           in ``raw_dropped``): the server's own words, kept to replay (spans_replay.py)
    snapshot() after the load: the checked timings by trace id, the bad spans' reasons counted,
    the unparsable bodies, the spans dropped past the bounds; wait_quiet() waits (bounded) for
    late spans. Memory: at most max_spans small dicts plus one body at a time per connection
    (max_connections handler threads at most).
"""
from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

from analysis.server import spans as spans_mod

MAX_BODY_BYTES = 16 * 2**20        # one export request
READ_TIMEOUT_S = 10.0              # a body that stalls this long is refused (408)
MAX_CONNECTIONS = 16


class _Handler(BaseHTTPRequestHandler):
    server_version = "loadgen-otlp"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:      # quiet: the run's output is the user's
        pass

    def _answer(self, code: int, body: bytes = b"", ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if code != 200:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:      # noqa: N802 (http.server's name)
        rx: Receiver = self.server.receiver          # type: ignore[attr-defined]
        if self.path.split("?")[0] != "/v1/traces":
            return self._answer(404, b'{"error":"POST /v1/traces only"}')
        try:
            n = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._answer(411, b'{"error":"Content-Length required"}')
        if n < 0 or n > rx.max_body_bytes:
            rx.refused("body over the size limit")
            return self._answer(413, b'{"error":"body over the size limit"}')
        self.connection.settimeout(rx.read_timeout_s)
        try:
            body = self.rfile.read(n)
        except OSError:
            rx.refused("body not sent in time")
            return self._answer(408, b'{"error":"body not sent in time"}')
        if len(body) < n:
            rx.refused("body shorter than its Content-Length")
            return self._answer(400, b'{"error":"short body"}')
        as_json = "json" in (self.headers.get("Content-Type") or "").lower()
        rx.keep_raw(body, as_json)
        d = spans_mod.decode(body, as_json=as_json, max_spans=rx.room())
        rx.take(d)
        if d.reason is not None:              # OTLP/HTTP: a body that does not parse is a 400
            return self._answer(400, b'{"error":"not an OTLP trace export"}')
        if as_json:
            return self._answer(200, b"{}")
        return self._answer(200, b"", "application/x-protobuf")

    def do_GET(self) -> None:      # noqa: N802
        self._answer(405, b'{"error":"POST /v1/traces only"}')


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS
    open: set

    def process_request(self, request, client_address):
        if not self.receiver.slots.acquire(blocking=False):   # type: ignore[attr-defined]
            self.shutdown_request(request)         # over the connection bound: dropped
            return
        self.open.add(request)
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.open.discard(request)
            self.receiver.slots.release()          # type: ignore[attr-defined]

    def handle_error(self, request, client_address) -> None:
        pass                     # a peer that hung up mid-request: nothing to say on stderr

    def close_all(self) -> None:
        """End every kept-alive connection: a later receiver on the same port gets the
        exporter's next request, not a handler thread of this one."""
        for sock in list(self.open):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class Receiver:
    """See the module doc. ``with Receiver(0) as rx: ... rx.snapshot()``."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1",
                 max_body_bytes: int = MAX_BODY_BYTES, max_spans: int = spans_mod.MAX_SPANS,
                 read_timeout_s: float = READ_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
                 raw_path: Optional[Path] = None, raw_max_bytes: int = 0):
        self.host, self.want_port = host, port
        self.max_body_bytes, self.max_spans = max_body_bytes, max_spans
        self.read_timeout_s = read_timeout_s
        self.slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self.timings: dict[str, dict] = {}
        self.reasons: Counter = Counter()       # a bad span's reason ─► count
        self.refusals: Counter = Counter()      # a refused or unparsable body's reason ─► count
        self.kept = self.foreign = self.dropped = self.duplicates = 0
        self.last_at = 0.0                      # monotonic time of the last export
        self.raw_path, self.raw_max_bytes = raw_path, raw_max_bytes
        self.raw_bytes = self.raw_bodies = self.raw_dropped = 0
        self._srv: Optional[_Server] = None
        self._bound = 0
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        """The bound port while running, and after stop (server_spans.json is written then)."""
        return self._srv.server_address[1] if self._srv is not None else self._bound or self.want_port

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}/v1/traces"

    def start(self) -> "Receiver":
        self._srv = _Server((self.host, self.want_port), _Handler)
        self._bound = self._srv.server_address[1]
        self._srv.receiver = self                   # type: ignore[attr-defined]
        self._srv.open = set()
        self._thread = threading.Thread(target=self._srv.serve_forever, name="otlp-receiver",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._srv is not None:
            self._srv.shutdown()
            self._srv.server_close()
            self._srv.close_all()
            self._srv = None

    def __enter__(self) -> "Receiver":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- called by the handler threads -------------------------------------------------------
    def room(self) -> int:
        with self._lock:
            return max(0, self.max_spans - self.kept)

    def refused(self, why: str) -> None:
        with self._lock:
            self.refusals[why] += 1
            self.last_at = time.monotonic()

    def keep_raw(self, body: bytes, as_json: bool) -> None:
        if self.raw_path is None:
            return
        line = json.dumps({"json": as_json, "body": base64.b64encode(body).decode()}) + "\n"
        with self._lock:
            if self.raw_bytes + len(line) > self.raw_max_bytes:
                self.raw_dropped += 1
                return
            with open(self.raw_path, "a", encoding="ascii") as f:
                f.write(line)
            self.raw_bytes += len(line)
            self.raw_bodies += 1

    def take(self, d: spans_mod.Decoded) -> None:
        checked = [(tid, *spans_mod.timing(a)) for tid, a in d.spans]    # outside the lock
        with self._lock:
            self.last_at = time.monotonic()
            if d.reason is not None:
                self.refusals[d.reason] += 1
            self.foreign += d.foreign
            self.dropped += d.dropped
            for tid, t, why in checked:
                if self.kept >= self.max_spans:
                    self.dropped += 1
                    continue
                self.kept += 1
                if why is not None:
                    self.reasons[why] += 1
                elif tid in self.timings:
                    self.duplicates += 1             # the first span of a trace is kept
                else:
                    self.timings[tid] = t

    # -- after the load --------------------------------------------------------------------
    def wait_quiet(self, quiet_s: float, max_s: float) -> None:
        """Until no export came for ``quiet_s`` (or none at all), at most ``max_s`` seconds."""
        end = time.monotonic() + max_s
        while True:
            now = time.monotonic()
            if now >= end or now - max(self.last_at, end - max_s) >= quiet_s:
                return
            time.sleep(min(0.05, end - now))

    def snapshot(self) -> dict:
        with self._lock:
            return {"timings": dict(self.timings), "bad_spans": dict(self.reasons),
                    "refused_bodies": dict(self.refusals),
                    "foreign_spans": self.foreign, "dropped_spans": self.dropped,
                    "duplicate_spans": self.duplicates,
                    **({"raw_bodies": self.raw_bodies, "raw_dropped": self.raw_dropped}
                       if self.raw_path is not None else {})}
