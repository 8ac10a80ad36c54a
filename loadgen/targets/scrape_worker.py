"""The /metrics scraper's own process: GET, parse and write, never in the client's interpreter.

    python -m loadgen.targets.scrape_worker         (started by scrape.ScrapeProcess)
      stdin  line 1: the config as JSON {url, out, interval_s, timeout_s, max_bytes, headers, nice}
                     (headers may hold an API key: they travel on the pipe, never on the argv)
             then commands, one a line:  mark NAME T_NS  |  stop
      stdout one JSON event a line:  {"event": "started", "describe": {...}}
                                     {"event": "marked", "name": NAME}
                                     {"event": "stopped", "describe": {...}}
      loop   select() on stdin with the next tick as timeout: a command is served at once, a
             tick does one scrape (absolute deadlines every interval_s; missed ticks skipped):
             GET on a kept-alive connection, prometheus_text.parse_samples, rows appended
      EOF on stdin (the client died): the file is closed and the process exits

Why a process: vLLM's /metrics is ~600 lines and prometheus_client's pure-Python parser takes
~20 ms of CPU per scrape; in a thread of the client it holds the GIL that long, and the event loop
that stamps chunk arrivals wakes late (loop lag p99 ~2 ms ─► 10-15 ms). Here it holds its own GIL.
The clock is the same: time.perf_counter_ns is CLOCK_MONOTONIC, shared by every process on the
host (Linux), so rows and records line up. The row format is scrape.py's (its docstring).
"""
from __future__ import annotations

import http.client
import json
import os
import select
import sys
import time
import urllib.parse
from typing import Optional

from loadgen.targets.prometheus_text import parse_samples

SCRAPE, MARK = "loadgen:scrape", "loadgen:mark"
FATAL_STATUS = (401, 403, 404, 405, 501)     # on the first scrape: this server has no usable /metrics
now_ns = time.perf_counter_ns
_dumps = json.JSONEncoder(separators=(",", ":")).encode


class Scraper:
    """One process's scraping state: a kept-alive connection, the file, the counts."""

    def __init__(self, url: str, out: str, interval_s: float = 1.0, timeout_s: float = 5.0,
                 max_bytes: int = 512 * 2**20, headers: Optional[dict] = None, nice: int = 0,
                 **_ignored):
        self.url, self.out = url, out
        u = urllib.parse.urlsplit(url)
        self.scheme, self.host, self.port = u.scheme, u.hostname, u.port
        self.target = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self.interval_s, self.timeout_s, self.max_bytes = interval_s, timeout_s, max_bytes
        self.headers = {"Accept": "text/plain", **(headers or {})}
        self.nice = nice
        self.status, self.reason = "measured", None
        self.ok = self.failed = self.rows = self.bytes = 0
        self.first_error: Optional[str] = None
        self.last_error: Optional[str] = None
        self.truncated = False
        self.parse_s = self.get_s = 0.0
        self._last: dict = {}
        self._conn: Optional[http.client.HTTPConnection] = None
        self._f = open(out, "a", encoding="utf-8")

    # -- HTTP -------------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = (http.client.HTTPSConnection if self.scheme == "https"
                   else http.client.HTTPConnection)
            self._conn = cls(self.host, self.port, timeout=self.timeout_s)
        return self._conn

    def _get(self) -> tuple[int, bytes]:
        """One GET on the kept-alive connection; a stale one is retried once on a fresh one."""
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.request("GET", self.target, headers=self.headers)
                r = conn.getresponse()
                body = r.read()
                if r.getheader("connection", "").lower() == "close":
                    self._close_conn()
                return r.status, body
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError) as e:
                self._close_conn()
                if attempt:
                    raise e
            except BaseException:
                self._close_conn()
                raise
        raise RuntimeError("unreachable")

    def _close_conn(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None

    # -- one scrape -------------------------------------------------------------------------
    def scrape(self, full: bool = False, first: bool = False) -> bool:
        """One GET ─► rows; True when its samples were written."""
        t = time.monotonic()
        try:
            code, body = self._get()
        except (OSError, http.client.HTTPException, ValueError) as e:
            return self._error(now_ns(), t, f"{type(e).__name__}: {e}", False)
        t_ns, dt = now_ns(), time.monotonic() - t
        if code != 200:
            return self._error(t_ns, t, f"HTTP {code}", first and code in FATAL_STATUS)
        p0 = time.perf_counter()
        try:
            samples = parse_samples(body.decode("utf-8", errors="replace"))
        except Exception as e:  # prometheus_client's parser: not exposition text
            return self._error(t_ns, t, f"not Prometheus text ({e})"[:200], first)
        rows = [(t_ns, SCRAPE, {"status": "ok"}, dt)]
        last = self._last
        for name, labels, value, gauge in samples:
            key = (name, tuple(sorted(labels.items())))
            if gauge or full or last.get(key) != value:
                last[key] = value
                rows.append((t_ns, name, labels, value))
        self.parse_s += time.perf_counter() - p0
        self.ok += 1
        self.get_s += dt
        return self.write(rows) > 0

    def _error(self, t_ns: int, t: float, msg: str, fatal: bool) -> bool:
        self.failed += 1
        self.first_error = self.first_error or msg
        self.last_error = msg
        self.write([(t_ns, SCRAPE, {"status": "error", "error": msg}, time.monotonic() - t)])
        if fatal:
            self.status, self.reason = "unavailable", f"GET {self.url}: {msg}"
        return False

    def mark(self, name: str, t_ns: int) -> None:
        """A mark row stamped by the client, then at once a full scrape (window edges)."""
        if self.status != "measured":
            return
        self.write([(t_ns, MARK, {"mark": name}, 1.0)])
        self.scrape(full=True)

    def write(self, rows: list[tuple]) -> int:
        if self._f is None or self.truncated:
            return 0
        text = "".join(_dumps({"t_ns": t, "name": n, "labels": lb, "value": v}) + "\n"
                       for t, n, lb, v in rows)
        if self.bytes + len(text) > self.max_bytes:
            self.truncated = True
            return 0
        self._f.write(text)
        self._f.flush()
        self.rows += len(rows)
        self.bytes += len(text)
        return len(rows)

    def close(self) -> None:
        self._close_conn()
        if self._f is not None:
            self._f.close()
            self._f = None

    def describe(self) -> dict:
        cpu = os.times()
        return {"status": self.status, "reason": self.reason, "url": self.url,
                "scrapes_ok": self.ok, "scrapes_failed": self.failed,
                "first_error": self.first_error, "last_error": self.last_error,
                "rows": self.rows, "bytes": self.bytes, "truncated": self.truncated,
                "get_ms_mean": round(self.get_s / self.ok * 1e3, 3) if self.ok else None,
                "parse_ms_mean": round(self.parse_s / self.ok * 1e3, 3) if self.ok else None,
                "worker_cpu_s": round(cpu.user + cpu.system, 3), "worker_pid": os.getpid(),
                "worker_nice": self.nice}


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def serve(cfg: dict, stdin_fd: int) -> int:
    """The worker's life (see the module docstring); returns the exit code."""
    if cfg.get("nice"):
        try:
            os.nice(int(cfg["nice"]))
        except OSError:
            cfg["nice"] = 0
    s = Scraper(**cfg)
    s.scrape(full=True, first=True)
    _emit({"event": "started", "describe": s.describe()})
    interval = s.interval_s
    t0, k, buf = time.monotonic(), 1, b""
    try:
        while True:
            if s.status == "measured":
                k = max(k, int((time.monotonic() - t0) / interval) + 1)   # skip missed ticks
                timeout: Optional[float] = max(0.0, t0 + k * interval - time.monotonic())
            else:
                timeout = None                   # unavailable: only wait for stop / EOF
            ready, _, _ = select.select([stdin_fd], [], [], timeout)
            if not ready:
                k += 1
                try:
                    s.scrape()
                except Exception as e:           # never let the loop die on a bad scrape
                    s._error(now_ns(), time.monotonic(), f"{type(e).__name__}: {e}", False)
                continue
            data = os.read(stdin_fd, 65536)
            if not data:                         # the client is gone
                return 0
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                cmd = line.decode("utf-8", "replace").split()
                if not cmd:
                    continue
                if cmd[0] == "mark" and len(cmd) == 3:
                    try:
                        s.mark(cmd[1], int(cmd[2]))
                    except Exception as e:
                        s._error(now_ns(), time.monotonic(), f"{type(e).__name__}: {e}", False)
                    _emit({"event": "marked", "name": cmd[1]})
                elif cmd[0] == "stop":
                    if s.status == "measured":
                        try:
                            s.scrape(full=True)
                        except Exception as e:
                            s._error(now_ns(), time.monotonic(), f"{type(e).__name__}: {e}",
                                     False)
                    s.close()
                    _emit({"event": "stopped", "describe": s.describe()})
                    return 0
    finally:
        s.close()


def main() -> int:
    fd = sys.stdin.fileno()
    line = b""
    while not line.endswith(b"\n"):              # the config line, read unbuffered
        chunk = os.read(fd, 1)
        if not chunk:
            return 2
        line += chunk
    return serve(json.loads(line), fd)


if __name__ == "__main__":
    sys.exit(main())
