"""``python -m loadgen.live.exporter --fd N --feed PATH``: the /metrics server, its own process.

    listening socket (bound by the parent: fd N, inherited) ─► HTTP thread: GET /metrics
        ─► the families' registry (prometheus_client text format 0.0.4); any other path: 404
    stdin, one JSON object a line, from the parent (loadgen.live.server):
        {"follow": RUN_DIR}   the current follow caught up to its end, then this run followed
        {"stop": true} or EOF (the parent is gone): the socket closed, exit 0
    main loop: every POLL_S, RecordFollower.poll() ─► LiveMetrics.observe(record)
    feed PATH (loadgen.live.feed: the progress counters) ─► loadgen_in_flight at each scrape
    stdout: "ready" once the HTTP thread serves

Runs at nice +NICE (the sender it observes keeps the CPU); SIGINT ignored (a terminal's Ctrl-C
reaches the process group: the parent ends the run, then stops this process).
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

POLL_S = 0.1
NICE = 10


class _Server(ThreadingHTTPServer):
    daemon_threads = True


def serve(sock: socket.socket, registry) -> _Server:
    """Serve ``registry`` on /metrics over the already listening ``sock`` (a daemon thread)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):                           # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):               # no access log on the run's terminal
            pass

    srv = _Server(sock.getsockname()[:2], Handler, bind_and_activate=False)
    srv.socket.close()
    srv.socket, srv.address_family = sock, sock.family
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1},
                     name="loadgen-live-http", daemon=True).start()
    return srv


def _commands(buf: bytearray) -> tuple[list[dict], bool]:
    """Whole lines of stdin as commands; True when stdin ended (the parent is gone)."""
    try:
        data = os.read(0, 65536)
    except BlockingIOError:
        return [], False
    except OSError:
        data = b""
    if not data:
        return [], True
    buf += data
    *lines, rest = bytes(buf).split(b"\n")
    buf[:] = rest
    out = []
    for line in lines:
        try:
            cmd = json.loads(line)
        except ValueError:
            continue
        if isinstance(cmd, dict):
            out.append(cmd)
    return out, False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.live.exporter")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--feed", required=True)
    a = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(NICE)
    except OSError:
        pass
    from prometheus_client import disable_created_metrics

    from loadgen.live.feed import in_flight, open_counters
    from loadgen.live.follow import RecordFollower
    from loadgen.live.metrics import LiveMetrics
    disable_created_metrics()               # no *_created series: only the families listed
    ctr = open_counters(a.feed)
    live = LiveMetrics(in_flight=(lambda: in_flight(ctr)) if ctr is not None else None)
    srv = serve(socket.socket(fileno=a.fd), live.registry)
    print("ready", flush=True)
    os.set_blocking(0, False)
    follower, buf = None, bytearray()
    while True:
        ready, _, _ = select.select([0], [], [], POLL_S)
        cmds, ended = _commands(buf) if ready else ([], False)
        for cmd in cmds:
            if cmd.get("stop"):
                ended = True
            elif cmd.get("follow"):
                if follower is not None:        # the previous run, read to its end
                    _catch_up(follower, live)
                    follower.close()
                follower = RecordFollower(cmd["follow"])
        if ended:
            break
        if follower is not None:
            for rec in follower.poll():
                _observe(live, rec)
    srv.server_close()                          # the port is free from here
    return 0


def _observe(live, rec: dict) -> None:
    try:
        live.observe(rec)
    except (TypeError, ValueError):             # a malformed record: not this exporter's to fix
        pass


def _catch_up(follower, live) -> None:
    while True:
        for rec in follower.poll():
            _observe(live, rec)
        if not follower.moved:
            return


if __name__ == "__main__":
    sys.exit(main())
