"""A hostile HTTP server: every way a half-working server, gateway or proxy can hurt a load tester.

    client ──GET /v1/models, /health──► a normal answer (model ``hostile``; echo_secret_sut and
              redirect_307 excepted)
    client ──GET /metrics──► said.metrics_text(case, k): the cases about what a server says; else 404
    client ──POST /v1/chat/completions | /v1/completions | /v1/audio/transcriptions──►
              cases.CASES[case]: the answer
    test   ──GET /hostile/log──► {"case", "second_port" (redirect_307's other listener, else null),
              "requests": every request either listener has seen, in order: [{"listener": "main" |
              "second", "method", "path", "headers": {lower-case name: value}}]}

Raw asyncio streams (no HTTP library between the test and the bytes); its own process, so a flood
never shares a core's GIL with the client under test. Keep-alive is honoured for requests answered
whole; endless answers end when the client goes away, and the whole server exits after
``--lifetime`` seconds whatever happens (nothing it starts outlives a test).

The cases: servers/hostile/cases.py; what a client should record for each: docs/survives.md.
Run: ``python -m servers.hostile.server --case header_flood --port 0 [--lifetime 120]``
prints ``PORT <n>`` when listening. ``HostileServer(case)`` runs that as a context manager.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.request
from typing import Optional

from servers.hostile.cases import CASES
from servers.hostile.pieces import PIECE, STATE, Request, head, json_answer, models
from servers.hostile.said import metrics_text
from servers.port_server import PortServer


async def read_request(reader: asyncio.StreamReader) -> Optional[Request]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 2:
        return None
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    n = int(headers.get("content-length") or 0)
    if n:
        try:
            body = await reader.readexactly(n)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
    return Request(parts[0], parts[1], headers, body)


def answer_get(req: Request) -> bytes:
    path = req.path.split("?")[0]
    if path == "/hostile/log":
        return json_answer({"case": STATE["case"], "second_port": STATE["second_port"],
                            "requests": STATE["log"]})
    if STATE["case"] == "echo_secret_sut" and path in ("/v1/models", "/info", "/version", "/props"):
        echo = (f"X-Echo-Authorization: {req.headers.get('authorization', '')}\r\n"
                f"X-Echo-Api-Key: {req.headers.get('x-api-key', '')}")
        said = {"echo": req.secrets()}
        return json_answer(models(said) if path == "/v1/models" else said, extra=echo)
    if STATE["case"] == "redirect_307" and path == "/v1/models":
        loc = f"http://127.0.0.1:{STATE['second_port']}{req.path}"
        return head("307 Temporary Redirect", f"Location: {loc}", "text/plain",
                    "Content-Length: 0")
    if path == "/metrics":
        text = metrics_text(STATE["case"], STATE["metrics_served"])
        STATE["metrics_served"] += 1
        if text is not None:
            body = text.encode("latin-1")
            return head(ctype="text/plain; version=0.0.4",
                        framing=f"Content-Length: {len(body)}") + body
    if path == "/v1/models":
        return json_answer(models())
    if path == "/health":
        return json_answer({"status": "ok"})
    return json_answer({"error": {"message": "not found"}}, "404 Not Found")


def handler(listener: str, case: str):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                req = await read_request(reader)
                if req is None:
                    break
                STATE["log"].append({"listener": listener, "method": req.method, "path": req.path,
                                     "headers": req.headers})
                if req.method == "GET":
                    writer.write(answer_get(req))
                    keep = True
                else:
                    keep = await CASES[case](req, reader, writer)
                if writer.is_closing():
                    return
                await writer.drain()
                if not keep or req.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, OSError):
            return
        try:
            writer.close()
        except (ConnectionError, OSError):
            pass
    return handle


async def serve(case: str, port: int, lifetime_s: float) -> None:
    STATE["case"] = case
    if case == "redirect_307":               # the other "host": a normal server that logs
        second = await asyncio.start_server(handler("second", "normal"), "127.0.0.1", 0)
        STATE["second_port"] = second.sockets[0].getsockname()[1]
    main = await asyncio.start_server(handler("main", case), "127.0.0.1", port,
                                      limit=PIECE)
    print(f"PORT {main.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.sleep(lifetime_s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--lifetime", type=float, default=120.0,
                    help="exit after this many seconds whatever happens (default 120)")
    a = ap.parse_args(argv)
    try:
        asyncio.run(serve(a.case, a.port, a.lifetime))
    except KeyboardInterrupt:
        pass
    return 0


class HostileServer(PortServer):
    """``with HostileServer("header_flood") as s: s.url, s.log()``: one case in its own process."""

    label = "hostile server"

    def __init__(self, case: str, lifetime_s: float = 120.0):
        if case not in CASES:
            raise ValueError(f"unknown case {case!r} (known: {', '.join(sorted(CASES))})")
        self.case = case
        super().__init__([sys.executable, "-m", "servers.hostile.server", "--case", case,
                          "--port", "0", "--lifetime", str(lifetime_s)])

    def log(self, timeout_s: float = 10.0) -> dict:
        """``{"case", "second_port", "requests"}``: every request both listeners have seen."""
        with urllib.request.urlopen(self.url + "/hostile/log", timeout=timeout_s) as r:
            return json.loads(r.read())


if __name__ == "__main__":
    sys.exit(main())
