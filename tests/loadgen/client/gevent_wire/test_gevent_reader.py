"""The Locust worker's one reader (loadgen/client/gevent_wire/reader.py) on real sockets.

A scripted TCP server on 127.0.0.1 (threads, in the pytest process) answers each request with
recorded byte streams (tests/fixtures/servers/: real vLLM and llama.cpp answers), written in
pieces: as recorded, cut every 7 bytes (events and chunk headers split across reads), cut short
by a FIN, cut short by a reset. Several Locust-side clients (GWire, gevent, in a subprocess:
the pytest process is never gevent-patched) stream at once through the process's one reader,
for each reader kind. Each record must equal, in everything but the times, the native wire
transport's record of the same bytes (test_gevent_client.native); every stamp the kernel's. No timing
asserts: the server's pauses only make separate reads likely.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from tests.loadgen.client.gevent_wire.test_gevent_client import FIXTURES, ROOT, native, recorded_reads

SKIP = ("id", "sent_at_ns", "first_chunk_at_ns", "first_token_at_ns", "end_at_ns",
         "first_answer_at_ns", "coalesced_reads", "chunks")


def _raw(name: str) -> tuple[list, bool]:
    """(the recorded reads of a fixture [(bytes, stamp)], streamed?)"""
    case = json.loads((FIXTURES / name).read_text())
    return recorded_reads(case), bool(case["request"]["body"].get("stream"))


VLLM, _ = _raw("vllm/chat-stream-usage.json")
LLAMA, _ = _raw("llama.cpp/completions-stream.json")
VLLM_RAW = b"".join(d for d, _ in VLLM)


def _cut(raw: bytes, n: int) -> list:
    return [raw[i:i + n] for i in range(0, len(raw), n)]


# case: (pieces written, how the answer ends: keep | fin | rst)
CASES = {
    "vllm": ([d for d, _ in VLLM], "keep"),
    "vllm-7": (_cut(VLLM_RAW, 7), "keep"),
    "llama": ([d for d, _ in LLAMA], "keep"),
    "fin-mid": ([d for d, _ in VLLM][:len(VLLM) // 2], "fin"),
    "rst-mid": ([d for d, _ in VLLM][:len(VLLM) // 2], "rst"),
}


class ScriptServer:
    """Reads one request at a time on each connection, answers with its X-Case's pieces."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        buf = b""
        with c:
            while True:
                while b"\r\n\r\n" not in buf:
                    got = c.recv(65536)
                    if not got:
                        return
                    buf += got
                head, _, buf = buf.partition(b"\r\n\r\n")
                h = {k.strip().lower(): v.strip() for k, _, v in
                     (ln.partition(b":") for ln in head.split(b"\r\n")[1:])}
                need = int(h.get(b"content-length", b"0"))
                while len(buf) < need:
                    buf += c.recv(65536)
                buf = buf[need:]
                pieces, end = CASES[h[b"x-case"].decode()]
                for p in pieces:
                    c.sendall(p)
                    time.sleep(0.002)
                if end == "rst":
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                if end != "keep":
                    return

    def close(self) -> None:
        self.ls.close()


SCRIPT = r"""
from gevent import monkey; monkey.patch_all()
import json, sys
import gevent
from loadgen.client.request import finish
from loadgen.client.sse import StreamTally
from loadgen.client.gevent_wire.conn import process_stamps
from loadgen.client.gevent_wire.client import GWire
from loadgen.client.gevent_wire.reader import process_reader
from loadgen.record import Record
url, plan = sys.argv[1], json.loads(sys.argv[2])
out = []
def user(u, cases):
    w = GWire(url + "/v1/chat/completions", 30, 5, stamps=process_stamps())
    for k, case in enumerate(cases):
        rec = Record(id=u * 10 + k, phase="measured", scheduled_at_ns=0,
                     requested_output_tokens=8, workload_prompt_tokens=5)
        tally = StreamTally()
        w.post({"Content-Type": "application/json", "X-Case": case}, b'{"stream": true}', rec,
               tally, True)
        finish(rec, tally, 5)
        out.append({"case": case, "rec": rec.__dict__})
    out.append({"user": u, "opened": w.connections_opened})
    w.close()
gevent.joinall([gevent.spawn(user, u, c) for u, c in enumerate(plan)], raise_error=True)
r = process_reader()
print(json.dumps({"out": out, "kind": r.kind, "watched": len(r.conns), "reads": r.ready_reads,
                  "stamps": process_stamps().describe(),
                  "bad": [m for m in ("asyncio", "aiohttp", "geventhttpclient") if m in sys.modules]}))
"""


def _expected(case: str) -> dict:
    pieces, end = CASES[case]
    reads = [(p, 1_000 + i) for i, p in enumerate(pieces)]
    return native(reads, True)


@pytest.mark.parametrize("kind", ["epoll", "watchers"])
def test_one_reader_streams_many_sockets_as_the_native_transport(kind, monkeypatch):
    srv = ScriptServer()
    # each user: its cases in turn on one keep-alive socket (a FIN / reset ends that socket)
    plan = [["vllm", "vllm-7", "llama"], ["vllm-7", "vllm"], ["llama", "fin-mid"],
            ["rst-mid", "vllm"], ["vllm"] * 3, ["fin-mid", "llama"]]
    try:
        r = subprocess.run([sys.executable, "-c", SCRIPT, f"http://127.0.0.1:{srv.port}",
                            json.dumps(plan)], cwd=ROOT, capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT),
                                                 LOADGEN_LOCUST_READER=kind))
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["kind"] == kind and got["watched"] == 0 and got["bad"] == []
    recs = [x for x in got["out"] if "case" in x]
    assert len(recs) == sum(map(len, plan))
    for x in recs:
        rec = x["rec"]
        if x["case"] != "rst-mid":                   # a reset's message is the kernel's
            want = _expected(x["case"])
            assert {k: v for k, v in rec.items() if k not in SKIP} == \
                   {k: v for k, v in want.items() if k not in SKIP}, x["case"]
            assert [n for _, n in rec["chunks"]] == [n for _, n in want["chunks"]], x["case"]
        ts = [t for t, _ in rec["chunks"]]
        assert ts == sorted(ts) and all(rec["sent_at_ns"] < t <= rec["end_at_ns"] for t in ts)
    by = {x["case"]: x["rec"] for x in recs}
    assert by["vllm"]["status"] == by["vllm-7"]["status"] == by["llama"]["status"] == "ok"
    assert by["fin-mid"]["error_kind"] == "connection" and "closed" in by["fin-mid"]["error"]
    assert (by["rst-mid"]["status"], by["rst-mid"]["error_kind"]) == ("error", "connection")
    assert by["fin-mid"]["chunks"] and by["vllm"]["output_tokens"] == 8
    # keep-alive: a user whose answers all ended cleanly kept its one socket
    opened = {x["user"]: x["opened"] for x in got["out"] if "user" in x}
    assert [opened[u] for u in range(len(plan))] == [1, 1, 1, 2, 1, 2]
    st = got["stamps"]
    assert st["stamp_source"] == "kernel" and st["kernel_stamped_reads"] == st["reads"] > 0
    assert got["reads"] >= st["reads"]


PASSES_SCRIPT = r"""
from gevent import monkey; monkey.patch_all()
import json, socket
from loadgen.client.gevent_wire.reader import Reader
log = []
class Conn:                                   # a hand-written conn: a real socket, logged steps
    def __init__(self, name, sock):
        self.name, self.sock, self.fd = name, sock, sock.fileno()
    def recv(self):
        data = self.sock.recv(100)
        log.append(["recv", self.name])
        if self.name == "bad":
            raise RuntimeError("a bug of ours")
        return (data,)
    def process(self, got):
        log.append(["process", self.name, got[0].decode()])
    def read_failed(self, e):
        log.append(["failed", self.name, str(e)])
r = Reader("epoll")
pairs = {n: socket.socketpair() for n in ("a", "b", "bad", "c")}
conns = {n: Conn(n, p[0]) for n, p in pairs.items()}
for c in conns.values():
    r.watch(c)
for n, p in pairs.items():
    p[1].send(n.encode())
r.pump()                                      # from this greenlet, as a user does before a send
print(json.dumps({"log": log, "watched": sorted(c.name for c in r.conns.values()),
                  "reads": r.ready_reads}))
"""


def test_a_pump_reads_every_ready_socket_before_it_processes_any():
    """Pass 1 reads (recvmsg) every ready socket, pass 2 processes the reads in that order: a
    socket late in a lockstep burst is read before the others' framing and stream steps. A
    read that raised fails that conn only (and it is no longer watched)."""
    r = subprocess.run([sys.executable, "-c", PASSES_SCRIPT], cwd=ROOT, capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    log = got["log"]
    recvs = [x[1] for x in log if x[0] == "recv"]
    assert sorted(recvs) == ["a", "b", "bad", "c"] and got["reads"] == 4
    last_recv = max(i for i, x in enumerate(log) if x[0] == "recv")
    processed = [x for x in log if x[0] == "process"]
    assert all(log.index(x) > last_recv for x in processed)
    assert [x[1] for x in processed] == [n for n in recvs if n != "bad"]   # in read order
    assert all(x[2] == x[1] for x in processed)                            # each its own bytes
    assert ["failed", "bad", "a bug of ours"] in log
    assert got["watched"] == ["a", "b", "c"]
