"""Benchmark (not a test): does scraping the server's /metrics disturb the client's timing?

    calibration server (subprocess: TTFT 20 ms, ITL 10 ms)   ◄── `loadgen run` (subprocess),
    fake vLLM /metrics (subprocess: ~600 lines, vLLM 0.32's      Server mode, Poisson, 64-token
        names, labels and buckets; tests/loadgen/targets/          streams; target.metrics_path
        servers/vllm/metrics_fake.py)                              ◄──     = the fake's full URL
    modes, one `loadgen run` each, the same seeded schedule:
        off      target.scrape_metrics: false
        process  the scraper as shipped: GET + parse + write in its own process
                 (loadgen/targets/scrape_worker.py)
        thread   the scraper before issue 11: GET on the client's event loop, parse (with
                 prometheus_client's parser, as then) + write in a worker thread of the client
                 (holds the client's GIL ~20 ms per scrape); reproduced here (InThreadScraper)
                 by patching the runner in the run's process
    read from each run's summary.json ("client": loop_lag_ms_p99, cpu_fraction) and meta.json
    (client_load: loop-lag p50/max; server_metrics: scrapes, parse ms, worker CPU s)
Prints a table and ends with one JSON line. The host's load average is printed beside it (the
numbers move with other load on a shared box).

    python -m bench.scrape_interference [--duration 30] [--rate 20] [--interval 1.0]
                                        [--modes off,process,thread] [--repeat 1]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from servers.vllm.metrics_fake import FakeVllmMetrics, exposition
from servers.calib import CalibrationServer

LEGACY = "bench.scrape_interference:legacy_main"


# ------------------------------------------------------------------ the pre-issue-11 scraper
def legacy_main() -> int:
    """`loadgen` CLI with the runner's scraper replaced by the in-thread one (mode "thread")."""
    import asyncio
    import contextlib

    import aiohttp

    from loadgen import cli
    from loadgen.run import runner
    from loadgen.targets.scrape import FILE, MARK, SCRAPE
    # the parser it used: prometheus_client's (prometheus_text.parse_samples is a faster one now)
    from loadgen.targets.prometheus_text import parse_samples_reference as parse_samples

    class InThreadScraper:
        """What loadgen/targets/scrape.py did before: aiohttp GET in the event loop, the parse
        and the write in asyncio.to_thread (same rows, same file)."""

        def __init__(self, base_url, run_dir, interval_s=1.0, headers=None, path="/metrics",
                     timeout_s=5.0, max_bytes=512 * 2**20, api_key=None, enabled=True):
            self.url = path if path.startswith("http") else base_url.rstrip("/") + path
            self.path = Path(run_dir) / FILE
            self.interval_s, self.enabled = interval_s, enabled
            self.status, self.ok, self.parse_s, self.rows = "off", 0, 0.0, 0
            self._last, self._f, self._task, self._session = {}, None, None, None
            self._lock = asyncio.Lock()

        async def start(self):
            if not self.enabled:
                return self
            self._f = open(self.path, "a", encoding="utf-8")
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
            self.status = "measured"
            await self.scrape(True)
            self._task = asyncio.create_task(self._loop())
            return self

        async def _loop(self):
            t0, k = time.monotonic(), 1
            while True:
                k = max(k, int((time.monotonic() - t0) / self.interval_s) + 1)
                await asyncio.sleep(max(0.0, t0 + k * self.interval_s - time.monotonic()))
                k += 1
                with contextlib.suppress(Exception):
                    await self.scrape()

        async def scrape(self, full=False):
            async with self._lock:
                t = time.monotonic()
                async with self._session.get(self.url) as r:
                    text = await r.text()
                await asyncio.to_thread(self._parse_write, text, time.perf_counter_ns(),
                                        time.monotonic() - t, full)
                self.ok += 1

        def _parse_write(self, text, t_ns, dt, full):
            p0 = time.perf_counter()
            rows = [(t_ns, SCRAPE, {"status": "ok"}, dt)]
            for name, labels, value, gauge in parse_samples(text):
                key = (name, tuple(sorted(labels.items())))
                if gauge or full or self._last.get(key) != value:
                    self._last[key] = value
                    rows.append((t_ns, name, labels, value))
            self.parse_s += time.perf_counter() - p0
            self._write(rows)

        def _write(self, rows):
            self._f.write("".join(json.dumps({"t_ns": a, "name": b, "labels": c, "value": d})
                                  + "\n" for a, b, c, d in rows))
            self._f.flush()
            self.rows += len(rows)

        async def mark(self, name):
            if self.status == "measured":
                self._write([(time.perf_counter_ns(), MARK, {"mark": name}, 1.0)])
                with contextlib.suppress(Exception):
                    await self.scrape(True)

        async def stop(self):
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
            if self._session is not None:
                await self._session.close()
            if self._f is not None:
                self._f.close()
            return {"status": self.status, "url": self.url, "scrapes_ok": self.ok,
                    "rows": self.rows, "file": FILE, "isolation": "thread (legacy)",
                    "parse_ms_mean": round(self.parse_s / self.ok * 1e3, 3) if self.ok else None}

    runner.ServerMetricsScraper = InThreadScraper
    return cli.main()


# ------------------------------------------------------------------------------- the bench
def scenario(path: Path, url: str, metrics_url: str, mode: str, a) -> None:
    import yaml
    n = int(a.rate * a.duration)
    tree = {"name": f"scrape-{mode}",
            "target": {"url": url, "scrape_metrics": mode != "off",
                       "metrics_path": metrics_url + "/metrics",
                       "metrics_interval_s": a.interval},
            "api": {"model": "calib-model", "endpoint": "completions"},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 32},
                         "output_tokens": {"dist": "fixed", "value": a.tokens}, "seed": 0},
            "load": {"mode": "server", "rate": a.rate, "num_requests": n, "warmup_requests": 4},
            "output": {"dir": str(path.parent / "runs"), "run_name": path.stem,
                       "report": "none"}}
    path.write_text(yaml.safe_dump(tree))


def one_run(tmp: Path, url: str, metrics_url: str, mode: str, k: int, a) -> dict:
    sc = tmp / f"{mode}-{k}.yaml"
    scenario(sc, url, metrics_url, mode, a)
    argv = ([sys.executable, "-c", "import sys; sys.argv[0] = 'loadgen'; "
             "from bench.scrape_interference import legacy_main; sys.exit(legacy_main())"]
            if mode == "thread" else [sys.executable, "-m", "loadgen"])
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    la0 = os.getloadavg()[0]
    p = subprocess.run([*argv, "run", str(sc), "--json"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=a.duration * 4 + 120)
    d = tmp / "runs" / sc.stem
    if not (d / "summary.json").exists():
        raise RuntimeError(f"{mode}: loadgen run failed ({p.returncode}):\n{p.stderr[-2000:]}")
    summary = json.loads((d / "summary.json").read_text())
    meta = json.loads((d / "meta.json").read_text())
    cl, load = summary["client"], meta.get("client_load") or {}
    sm = meta.get("server_metrics") or {}
    wall = load.get("wall_s") or summary.get("duration_s")
    return {"mode": mode, "repeat": k,
            "loop_lag_ms_p99": cl.get("loop_lag_ms_p99"), "loop_lag_ms_p50":
                load.get("loop_lag_ms_p50"), "loop_lag_ms_max": load.get("loop_lag_ms_max"),
            "client_cpu_fraction": cl.get("cpu_fraction"), "client_saturated": cl["saturated"],
            "client_warnings": cl.get("warnings"),
            "requests_completed": summary.get("requests_completed"),
            "requests_failed": summary.get("requests_failed"),
            "itl_ms_p99": (summary.get("itl_ms") or {}).get("p99"),
            "ttft_ms_p99": (summary.get("ttft_ms") or {}).get("p99"),
            "scrapes": sm.get("scrapes_ok"), "parse_ms_mean": sm.get("parse_ms_mean"),
            "scraper": sm.get("isolation"),
            "worker_cpu_fraction": (round(sm["worker_cpu_s"] / wall, 4)
                                    if sm.get("worker_cpu_s") is not None and wall else None),
            "loadavg_1m_before": round(la0, 2), "loadavg_1m_after": round(os.getloadavg()[0], 2)}


def _fmt(v, f="{:.2f}") -> str:
    return "—" if v is None else f.format(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0, help="measured seconds per run")
    ap.add_argument("--rate", type=float, default=20.0, help="requests/s (Poisson)")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=1.0, help="target.metrics_interval_s")
    ap.add_argument("--modes", default="off,process,thread")
    ap.add_argument("--repeat", type=int, default=1, help="rounds (modes alternate each round)")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # servers stopped on the way out
    modes = a.modes.split(",")
    lines = len(exposition(1).splitlines())
    runs = []
    with tempfile.TemporaryDirectory(prefix="scrape-bench-") as td, \
            CalibrationServer(ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, log=False) as cal, \
            FakeVllmMetrics() as fake:
        for k in range(a.repeat):
            for mode in modes:
                r = one_run(Path(td), cal.url, fake.url, mode, k, a)
                runs.append(r)
                print(f"  {mode:8s} round {k}: lag p99 {_fmt(r['loop_lag_ms_p99'])} ms, client "
                      f"CPU {_fmt(r['client_cpu_fraction'], '{:.1%}')}, load avg "
                      f"{r['loadavg_1m_before']}", file=sys.stderr, flush=True)
    by_mode = {}
    for mode in modes:
        rs = [r for r in runs if r["mode"] == mode]

        def med(key):
            vals = [r[key] for r in rs if r[key] is not None]
            return statistics.median(vals) if vals else None
        by_mode[mode] = {key: med(key) for key in (
            "loop_lag_ms_p99", "loop_lag_ms_p50", "loop_lag_ms_max", "client_cpu_fraction",
            "worker_cpu_fraction", "parse_ms_mean", "itl_ms_p99", "ttft_ms_p99")}
        by_mode[mode]["scrapes"] = med("scrapes")
        by_mode[mode]["runs"] = len(rs)
        by_mode[mode]["saturated_runs"] = sum(bool(r["client_saturated"]) for r in rs)
        by_mode[mode]["failed_requests"] = sum(r["requests_failed"] or 0 for r in rs)
    print(f"\nscrape interference: {a.rate:g} req/s Poisson, {a.tokens} tokens, server TTFT "
          f"{a.ttft_ms:g} ms / ITL {a.itl_ms:g} ms, {a.duration:g} s per run, /metrics "
          f"{lines} lines every {a.interval:g} s; {os.cpu_count()} CPUs, load avg "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; median of {a.repeat} round(s)")
    print(f"{'mode':9s} {'lag p50':>8s} {'lag p99':>8s} {'lag max':>8s} {'client CPU':>10s} "
          f"{'scraper CPU':>11s} {'parse ms':>8s} {'scrapes':>7s} {'ITL p99':>8s} {'saturated':>9s}")
    for mode, m in by_mode.items():
        print(f"{mode:9s} {_fmt(m['loop_lag_ms_p50']):>8s} {_fmt(m['loop_lag_ms_p99']):>8s} "
              f"{_fmt(m['loop_lag_ms_max']):>8s} {_fmt(m['client_cpu_fraction'], '{:.1%}'):>10s} "
              f"{_fmt(m['worker_cpu_fraction'], '{:.1%}'):>11s} {_fmt(m['parse_ms_mean']):>8s} "
              f"{_fmt(m['scrapes'], '{:.0f}'):>7s} {_fmt(m['itl_ms_p99']):>8s} "
              f"{m['saturated_runs']}/{m['runs']:<7d}")
    print("lag: the client's event-loop wake-up lag (ms; summary.json client.loop_lag_ms_p99); "
          "client CPU: the loadgen process (share of one core); scraper CPU: the scrape worker "
          "process (process mode only)")
    print(json.dumps({"bench": "scrape_interference", "metrics_lines": lines, "rate": a.rate,
                      "duration_s": a.duration, "interval_s": a.interval, "repeat": a.repeat,
                      "cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
                      "by_mode": by_mode, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
