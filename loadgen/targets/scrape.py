"""Scrape the target's Prometheus /metrics during a run into server_metrics.jsonl (client clock).

    runner ─► ServerMetricsScraper(base_url, run_dir, interval_s, headers, path, api_key=,
                                   enabled=target.scrape_metrics).start()    (off: status "off")
                 ─► ScrapeProcess: `python -m loadgen.targets.scrape_worker` (scrape_worker.py),
                    its own interpreter: GET + parse + write never hold the client's GIL
                 first scrape: 404 / not Prometheus text ─► status "unavailable" (reason), no more GETs
                 worker loop: GET url every interval_s (absolute deadlines, timeout per GET)
           mark("measure_start") / mark("measure_end") ─► the client stamps the mark, the worker
                 writes it and at once a full scrape; mark() returns when that scrape is written
           stop() ─► a last full scrape, file closed, describe() (meta.json's "server_metrics")
    The Locust engine's CLI process runs its processes inside a runner.Run: the same scraper.

``path``: a path on the target ("/metrics"), or a full http(s):// URL when the server exposes its
metrics elsewhere (another port).

server_metrics.jsonl, one JSON object a line, t_ns = time.perf_counter_ns when the response was in
(CLOCK_MONOTONIC: the worker process and the client share it):
    {"t_ns", "name", "labels", "value"}  a sample as exposed: counters as "<name>_total",
        histograms as "<name>_sum" / "<name>_count" / "<name>_bucket" (labels carry "le")
    gauges are written at every scrape; counter and histogram samples only when their value changed
    since last written, and in full at the first scrape, at each mark and at the last one — so a
    series' value at time t is its last row at or before t.
    {"name": "loadgen:scrape", "labels": {"status": "ok"} | {"status": "error", "error": ...},
     "value": seconds the GET took}                       one per scrape attempt
    {"name": "loadgen:mark", "labels": {"mark": name}, "value": 1}

Failures never reach the run: an error is a "loadgen:scrape" row and a count in describe(); a
worker that cannot start or dies is said in describe() ("worker_error"), and the run goes on.
Disk use is bounded by ``max_bytes`` (then rows stop; describe() says "truncated").
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from loadgen.child_env import child_env
from loadgen.targets.prometheus_text import SKIP_PREFIXES, parse_samples
from loadgen.targets.scrape_worker import MARK, SCRAPE

__all__ = ["FILE", "SCRAPE", "MARK", "SKIP_PREFIXES", "parse_samples", "ScrapeProcess",
           "ServerMetricsScraper"]
FILE = "server_metrics.jsonl"
WORKER_MODULE = "loadgen.targets.scrape_worker"
WORKER_NICE = 5          # the scraper yields the CPU to the client (and the server) it observes
now_ns = time.perf_counter_ns


class ScrapeProcess:
    """The scrape worker process, driven synchronously (blocking calls, each bounded)."""

    def __init__(self, base_url: str, run_dir: str | Path, interval_s: float = 1.0,
                 headers: Optional[dict] = None, path: str = "/metrics", timeout_s: float = 5.0,
                 max_bytes: int = 512 * 2**20, api_key: Optional[str] = None,
                 enabled: bool = True, nice: int = WORKER_NICE):
        self.url = (path if path.startswith(("http://", "https://"))
                    else base_url.rstrip("/") + "/" + path.lstrip("/"))
        self.path = Path(run_dir) / FILE
        self.interval_s = interval_s
        self.headers = dict(headers or {})
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.enabled = enabled
        self.timeout_s = min(timeout_s, max(interval_s * 5, 1.0))
        self.max_bytes = max_bytes
        self.nice = nice
        self.status = "off"
        self.reason: Optional[str] = None
        self.worker_error: Optional[str] = None
        self._last: dict = {}                 # the worker's last describe()
        self._proc: Optional[subprocess.Popen] = None
        self._events: list = []
        self._cv = threading.Condition()
        self._stderr: list[bytes] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()        # one command at a time
        self._stopped = False

    # -- the process --------------------------------------------------------------------------
    def start(self) -> "ScrapeProcess":
        if not self.enabled:
            self.reason = "target.scrape_metrics is false"
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), close_fds=True)
        except OSError as e:
            return self._gave_up(f"scrape worker did not start: {e}")
        for target in (self._read_events, self._read_stderr):
            t = threading.Thread(target=target, name="scrape-worker-io", daemon=True)
            t.start()
            self._threads.append(t)
        cfg = {"url": self.url, "out": str(self.path), "interval_s": self.interval_s,
               "timeout_s": self.timeout_s, "max_bytes": self.max_bytes,
               "headers": self.headers, "nice": self.nice}
        if not self._send(json.dumps(cfg)):
            return self._gave_up("scrape worker closed its input before the config")
        ev = self._wait("started", self.timeout_s + 30.0)
        if ev is None:
            return self._gave_up("scrape worker did not report its first scrape")
        self._last = ev["describe"]
        self.status, self.reason = self._last["status"], self._last.get("reason")
        return self

    def _gave_up(self, why: str) -> "ScrapeProcess":
        self.worker_error = (why + (f"; stderr: {self.stderr_tail()}" if self.stderr_tail()
                                    else ""))
        self.status, self.reason = "unavailable", self.worker_error
        self._kill()
        return self

    def _read_events(self) -> None:
        for line in self._proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self._cv:
                self._events.append(ev)
                self._cv.notify_all()
        with self._cv:
            self._events.append({"event": "eof"})
            self._cv.notify_all()

    def _read_stderr(self) -> None:
        for line in self._proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-40]            # the tail is enough

    def stderr_tail(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace").strip()[-2000:]

    def _send(self, line: str) -> bool:
        try:
            self._proc.stdin.write((line + "\n").encode())
            self._proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def _wait(self, event: str, timeout_s: float) -> Optional[dict]:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while True:
                for i, ev in enumerate(self._events):
                    if ev.get("event") == event:
                        return self._events.pop(i)
                    if ev.get("event") == "eof":
                        return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _kill(self) -> None:
        p = self._proc
        if p is None:
            return
        with contextlib.suppress(OSError, ValueError):
            p.stdin.close()
        try:
            p.wait(2.0)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    # -- the interface ------------------------------------------------------------------------
    def mark(self, name: str) -> None:
        """A mark stamped now, then a full scrape; returns when the worker has written both."""
        if self.status != "measured" or not self._alive():
            return
        with self._lock:
            if self._send(f"mark {name} {now_ns()}"):
                if self._wait("marked", self.timeout_s + 10.0) is None and not self._alive():
                    self.worker_error = self.worker_error or (
                        f"scrape worker exited ({self._proc.poll()}) during mark {name}")

    def stop(self) -> dict:
        """A last full scrape, the file closed, the worker gone; idempotent."""
        if self._proc is not None and not self._stopped:
            self._stopped = True
            with self._lock:
                if self._alive() and self._send("stop"):
                    ev = self._wait("stopped", self.timeout_s + 10.0)
                    if ev is not None:
                        self._last = ev["describe"]
                    elif self.status == "measured":
                        self.worker_error = self.worker_error or (
                            "scrape worker did not answer stop: killed")
                elif self.status == "measured":
                    self.worker_error = self.worker_error or (
                        f"scrape worker exited early ({self._proc.poll()})")
                self._kill()
                for t in self._threads:
                    t.join(2.0)
                if self._proc.returncode not in (0, None) and self.status == "measured":
                    self.worker_error = self.worker_error or (
                        f"scrape worker exited with {self._proc.returncode}")
        return self.describe()

    def describe(self) -> dict:
        d = self._last
        rows = d.get("rows", 0)
        out = {"status": self.status, "reason": self.reason, "url": self.url,
               "file": FILE if rows else None, "interval_s": self.interval_s,
               "scrapes_ok": d.get("scrapes_ok", 0), "scrapes_failed": d.get("scrapes_failed", 0),
               "first_error": d.get("first_error"), "last_error": d.get("last_error"),
               "rows": rows, "bytes": d.get("bytes", 0), "truncated": d.get("truncated", False),
               "get_ms_mean": d.get("get_ms_mean"), "parse_ms_mean": d.get("parse_ms_mean"),
               "isolation": "process" if self._proc is not None else None,
               "worker_pid": d.get("worker_pid"), "worker_cpu_s": d.get("worker_cpu_s"),
               "worker_nice": d.get("worker_nice"),
               "worker_exit_code": self._proc.returncode if self._proc is not None else None,
               "worker_error": self.worker_error}
        if self.worker_error and self.stderr_tail():
            out["worker_stderr"] = self.stderr_tail()
        return out


class ServerMetricsScraper:
    """``async with ServerMetricsScraper(url, run_dir, 1.0, headers) as s: ... await s.mark(..)``
    — ScrapeProcess for the event loop: every wait on the worker runs in a thread, so the loop
    (and a server in the same loop, in tests) keeps running."""

    def __init__(self, base_url: str, run_dir: str | Path, interval_s: float = 1.0,
                 headers: Optional[dict] = None, path: str = "/metrics", timeout_s: float = 5.0,
                 max_bytes: int = 512 * 2**20, api_key: Optional[str] = None,
                 enabled: bool = True):
        self.proc = ScrapeProcess(base_url, run_dir, interval_s, headers, path, timeout_s,
                                  max_bytes, api_key, enabled)
        self.url, self.path = self.proc.url, self.proc.path

    @property
    def status(self) -> str:
        return self.proc.status

    async def start(self) -> "ServerMetricsScraper":
        await asyncio.to_thread(self.proc.start)
        return self

    async def mark(self, name: str) -> None:
        await asyncio.to_thread(self.proc.mark, name)

    async def stop(self) -> dict:
        return await asyncio.to_thread(self.proc.stop)

    def describe(self) -> dict:
        return self.proc.describe()

    async def __aenter__(self) -> "ServerMetricsScraper":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()
