"""One HTTP/1.1 exchange on a raw socket, captured byte for byte with arrival times.

    Conn(port) ── socket to 127.0.0.1:port (blocking, bounded timeouts)
    exchange(method, path, body, headers)
        send: request line + headers + JSON body              t0 = perf_counter after sendall
        recv loop (64 KiB reads): every read ─► reads[[t_ms, nbytes]]
            head: status line + raw header lines (kept in order, as sent)
            body framing:  Transfer-Encoding: chunked ─► chunks[{t_ms, data}] (the server's own writes;
                                                        t_ms = when the read completing the chunk arrived)
                           Content-Length            ─► one chunk per read
                           neither                   ─► read to EOF
        ─► Exchange(status, reason, headers, head_raw, framing, chunks, reads, body)
    after_body(wait_s)  did the server close the socket after the answer? (recv → b"" within wait_s)
                        ─► {"closed_by_server": bool, "closed_after_ms": float | None}

No HTTP library: aiohttp, urllib and http.client all hide the framing, the reads and an early close.
"""
from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from typing import Optional

READ = 65536


@dataclass
class Exchange:
    status: int = 0
    reason: str = ""
    headers: list = field(default_factory=list)        # [[name, value], ...] in wire order
    head_raw: str = ""
    framing: str = ""                                  # chunked | content-length | close
    chunks: list = field(default_factory=list)         # [{"t_ms", "data"}] body pieces (de-chunked)
    reads: list = field(default_factory=list)          # [[t_ms, nbytes]] every socket read
    body: bytes = b""
    error: Optional[str] = None                         # what went wrong on the wire, if anything

    def header(self, name: str) -> Optional[str]:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


class Conn:
    def __init__(self, port: int, timeout_s: float = 120.0):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.settimeout(timeout_s)
        self.buf = b""
        self.t0 = 0.0
        self.reads: list = []
        self.eof = False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _now_ms(self) -> float:
        return round((time.perf_counter() - self.t0) * 1000, 3)

    def _fill(self) -> bool:
        """One read into the buffer; False at EOF."""
        d = self.sock.recv(READ)
        self.reads.append([self._now_ms(), len(d)])
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def _until(self, sep: bytes) -> bytes:
        while sep not in self.buf:
            if not self._fill():
                raise ConnectionError(f"EOF before {sep!r}")
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise ConnectionError(f"EOF with {len(self.buf)} of {n} bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def exchange(self, method: str, path: str, body: Optional[dict] = None, headers: Optional[dict] = None,
                 max_s: float = 300.0) -> Exchange:
        data = (body if isinstance(body, bytes) else       # bytes: sent as is (multipart)
                json.dumps(body, separators=(",", ":")).encode() if body is not None else b"")
        h = {"Host": f"127.0.0.1:{self.port}", "User-Agent": "loadgen-compat-recorder", "Accept": "*/*",
             "Accept-Encoding": "identity"}
        if body is not None:
            h.update({"Content-Type": "application/json", "Content-Length": str(len(data))})
        h.update(headers or {})
        req = f"{method} {path} HTTP/1.1\r\n".encode() + b"".join(
            f"{k}: {v}\r\n".encode() for k, v in h.items()) + b"\r\n" + data
        self.reads = []
        ex = Exchange(reads=self.reads)
        deadline = time.monotonic() + max_s
        try:
            self.sock.sendall(req)
            self.t0 = time.perf_counter()
            head = self._until(b"\r\n\r\n")
            ex.head_raw = head.decode("latin-1")
            lines = ex.head_raw.split("\r\n")
            _, code, *reason = lines[0].split(" ", 2)
            ex.status, ex.reason = int(code), (reason[0] if reason else "")
            ex.headers = [[k.strip(), v.strip()] for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)]
            te, cl = (ex.header("Transfer-Encoding") or "").lower(), ex.header("Content-Length")
            if "chunked" in te:
                ex.framing = "chunked"
                while time.monotonic() < deadline:
                    size = int(self._until(b"\r\n").split(b";")[0].strip(), 16)
                    piece = self._exactly(size + 2)[:-2]
                    if size == 0:
                        break
                    ex.chunks.append({"t_ms": self.reads[-1][0], "data": piece})
            elif cl is not None:
                ex.framing = "content-length"
                n, got = int(cl), 0
                while got < n and time.monotonic() < deadline:
                    take = min(len(self.buf), n - got) if self.buf else 0
                    if take == 0:
                        if not self._fill():
                            raise ConnectionError(f"EOF with {got} of {n} body bytes")
                        continue
                    ex.chunks.append({"t_ms": self.reads[-1][0], "data": self.buf[:take]})
                    self.buf, got = self.buf[take:], got + take
            else:
                ex.framing = "close"
                while time.monotonic() < deadline:
                    if self.buf:
                        ex.chunks.append({"t_ms": self.reads[-1][0], "data": self.buf})
                        self.buf = b""
                    if not self._fill():
                        break
        except (OSError, ConnectionError, ValueError) as e:
            ex.error = f"{type(e).__name__}: {e}"
        ex.body = b"".join(c["data"] for c in ex.chunks)
        return ex

    def after_body(self, wait_s: float = 1.0) -> dict:
        """Whether the server closes the connection within ``wait_s`` of the answer's end."""
        if self.eof:
            return {"closed_by_server": True, "closed_after_ms": 0.0}
        t = time.perf_counter()
        self.sock.settimeout(wait_s)
        try:
            d = self.sock.recv(READ)
            if not d:
                self.eof = True
                return {"closed_by_server": True, "closed_after_ms": round((time.perf_counter() - t) * 1000, 3)}
            self.buf += d
            return {"closed_by_server": False, "closed_after_ms": None, "unexpected_bytes": len(d)}
        except socket.timeout:
            return {"closed_by_server": False, "closed_after_ms": None}
        except OSError as e:
            return {"closed_by_server": True, "closed_after_ms": 0.0, "error": f"{type(e).__name__}: {e}"}
        finally:
            self.sock.settimeout(120.0)
