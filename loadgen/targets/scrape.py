"""Scrape the target's Prometheus /metrics during a run into server_metrics.jsonl (client clock).

    runner ─► ServerMetricsScraper(base_url, run_dir, interval_s, headers, path, api_key=,
                                   enabled=target.scrape_metrics).start()    (off: status "off")
                 first scrape: 404 / not Prometheus text ─► status "unavailable" (reason), no more GETs
                 loop: GET base_url + path every interval_s (absolute deadlines, timeout per GET)
                       ─► body parsed and written in a worker thread (the event loop only does I/O)
           mark("measure_start") / mark("measure_end") ─► an immediate full scrape + a mark row
           stop() ─► a last full scrape, file closed, describe() (meta.json's "server_metrics")

server_metrics.jsonl, one JSON object a line, t_ns = time.perf_counter_ns when the response was in:
    {"t_ns", "name", "labels", "value"}  a sample as exposed: counters as "<name>_total",
        histograms as "<name>_sum" / "<name>_count" / "<name>_bucket" (labels carry "le")
    gauges are written at every scrape; counter and histogram samples only when their value changed
    since last written, and in full at the first scrape, at each mark and at the last one — so a
    series' value at time t is its last row at or before t.
    {"name": "loadgen:scrape", "labels": {"status": "ok"} | {"status": "error", "error": ...},
     "value": seconds the GET took}                       one per scrape attempt
    {"name": "loadgen:mark", "labels": {"mark": name}, "value": 1}

Failures never reach the run: an error is a "loadgen:scrape" row and a count in describe().
Disk use is bounded by ``max_bytes`` (then rows stop; describe() says "truncated").
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Optional

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

FILE = "server_metrics.jsonl"
SCRAPE, MARK = "loadgen:scrape", "loadgen:mark"
SKIP_PREFIXES = ("python_", "process_")      # the client library's own process metrics
FATAL_STATUS = (401, 403, 404, 405, 501)     # on the first scrape: this server has no usable /metrics
now_ns = time.perf_counter_ns
_dumps = json.JSONEncoder(separators=(",", ":")).encode


def parse_samples(text: str, skip_prefixes: tuple[str, ...] = SKIP_PREFIXES) -> list[tuple]:
    """Prometheus text ─► [(sample name, labels dict, value, is_gauge)]; ``_created`` dropped."""
    out = []
    for fam in text_string_to_metric_families(text):
        if fam.name.startswith(skip_prefixes):
            continue
        gauge = fam.type == "gauge"
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out.append((s.name, dict(s.labels), float(s.value), gauge))
    return out


class ServerMetricsScraper:
    """``async with ServerMetricsScraper(url, run_dir, 1.0, headers) as s: ... await s.mark(..)``"""

    def __init__(self, base_url: str, run_dir: str | Path, interval_s: float = 1.0,
                 headers: Optional[dict] = None, path: str = "/metrics", timeout_s: float = 5.0,
                 max_bytes: int = 512 * 2**20, api_key: Optional[str] = None,
                 enabled: bool = True):
        self.url = base_url.rstrip("/") + path
        self.path = Path(run_dir) / FILE
        self.interval_s = interval_s
        self.headers = dict(headers or {})
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.enabled = enabled
        self.timeout_s = min(timeout_s, max(interval_s * 5, 1.0))
        self.max_bytes = max_bytes
        self.status = "off"
        self.reason: Optional[str] = None
        self.ok = self.failed = self.rows = self.bytes = 0
        self.first_error: Optional[str] = None
        self.last_error: Optional[str] = None
        self.truncated = False
        self.parse_s = self.get_s = 0.0
        self._last: dict = {}                # (name, labels key) ─► last value written
        self._lock = asyncio.Lock()
        self._session: Optional[aiohttp.ClientSession] = None
        self._task: Optional[asyncio.Task] = None
        self._f = None

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> "ServerMetricsScraper":
        if not self.enabled:
            self.reason = "target.scrape_metrics is false"
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout_s), trust_env=False,
            headers=self.headers)
        self.status = "measured"
        await self.scrape(full=True, first=True)
        if self.status == "measured":
            self._task = asyncio.create_task(self._loop(), name="server-metrics")
        return self

    async def stop(self) -> dict:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self._session is not None:
            if self.status == "measured":
                with contextlib.suppress(Exception):
                    await self.scrape(full=True)
            await self._session.close()
            self._session = None
        if self._f is not None:
            self._f.close()
            self._f = None
        return self.describe()

    async def __aenter__(self) -> "ServerMetricsScraper":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # -- scraping -----------------------------------------------------------------------------
    async def _loop(self) -> None:
        t0 = time.monotonic()
        k = 1
        while True:
            k = max(k, int((time.monotonic() - t0) / self.interval_s) + 1)  # skip missed ticks
            await asyncio.sleep(max(0.0, t0 + k * self.interval_s - time.monotonic()))
            k += 1
            with contextlib.suppress(Exception):  # never let the loop die on a bad scrape
                await self.scrape()

    async def mark(self, name: str) -> None:
        """A mark row, then at once a full scrape (window edges: start before t0, end after)."""
        if self.status != "measured" or self._session is None:
            return
        async with self._lock:
            await self._write_rows([(now_ns(), MARK, {"mark": name}, 1.0)])
        with contextlib.suppress(Exception):
            await self.scrape(full=True)

    async def scrape(self, full: bool = False, first: bool = False) -> bool:
        """One GET; True when its samples were written."""
        async with self._lock:
            t = time.monotonic()
            try:
                async with self._session.get(self.url) as r:
                    text = await r.text(errors="replace")
                    code = r.status
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as e:
                return await self._error(now_ns(), t, f"{type(e).__name__}: {e}", False)
            t_ns, dt = now_ns(), time.monotonic() - t
            if code != 200:
                return await self._error(t_ns, t, f"HTTP {code}", first and code in FATAL_STATUS)
            try:
                n = await asyncio.to_thread(self._parse_and_write, text, t_ns, dt, full)
            except ValueError as e:  # prometheus_client's parser: not exposition text
                return await self._error(t_ns, t, f"not Prometheus text ({e})"[:200], first)
            self.ok += 1
            self.get_s += dt
            return n >= 0

    async def _error(self, t_ns: int, t: float, msg: str, fatal: bool) -> bool:
        self.failed += 1
        self.first_error = self.first_error or msg
        self.last_error = msg
        await self._write_rows([(t_ns, SCRAPE, {"status": "error", "error": msg},
                                 time.monotonic() - t)])
        if fatal:
            self.status, self.reason = "unavailable", f"GET {self.url}: {msg}"
        return False

    def _parse_and_write(self, text: str, t_ns: int, dt: float, full: bool) -> int:
        p0 = time.perf_counter()
        samples = parse_samples(text)
        rows = [(t_ns, SCRAPE, {"status": "ok"}, dt)]
        last = self._last
        for name, labels, value, gauge in samples:
            key = (name, tuple(sorted(labels.items())))
            if gauge or full or last.get(key) != value:
                last[key] = value
                rows.append((t_ns, name, labels, value))
        self.parse_s += time.perf_counter() - p0
        return self._write_sync(rows)

    async def _write_rows(self, rows: list[tuple]) -> None:
        await asyncio.to_thread(self._write_sync, rows)

    def _write_sync(self, rows: list[tuple]) -> int:
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

    def describe(self) -> dict:
        return {"status": self.status, "reason": self.reason, "url": self.url,
                "file": FILE if self.rows else None, "interval_s": self.interval_s,
                "scrapes_ok": self.ok, "scrapes_failed": self.failed,
                "first_error": self.first_error, "last_error": self.last_error,
                "rows": self.rows, "bytes": self.bytes, "truncated": self.truncated,
                "get_ms_mean": round(self.get_s / self.ok * 1e3, 3) if self.ok else None,
                "parse_ms_mean": round(self.parse_s / self.ok * 1e3, 3) if self.ok else None}
