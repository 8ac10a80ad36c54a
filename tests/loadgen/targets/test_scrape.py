"""The /metrics scraper: against a hand-written Prometheus endpoint (values known per scrape) and
against the real JAX server's /metrics (vLLM's names), alone and inside a `loadgen run`."""
import asyncio
import json
import time

import pytest
from aiohttp import web

from analysis.server.metrics import server_metrics_summary
from analysis.server.series import read_rows
from loadgen.targets.scrape import FILE, ServerMetricsScraper

HOST = "127.0.0.1"


def exposition(n: int) -> str:
    """Scrape n: running = n (gauge), a counter that grows every other scrape, a histogram."""
    return (f"# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="m"}} {n}\n'
            f"# TYPE vllm:generation_tokens counter\n"
            f'vllm:generation_tokens_total{{model_name="m"}} {10 * (n // 2)}\n'
            f'vllm:generation_tokens_created{{model_name="m"}} 1.7e9\n'
            f"# TYPE vllm:time_to_first_token_seconds histogram\n"
            f'vllm:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} 1\n'
            f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} 1\n'
            f'vllm:time_to_first_token_seconds_sum{{model_name="m"}} 0.05\n'
            f'vllm:time_to_first_token_seconds_count{{model_name="m"}} 1\n'
            f"# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 3.0\n")


class Endpoint:
    """A real aiohttp server on 127.0.0.1; ``mode`` picks what GET /metrics answers."""

    def __init__(self, mode="ok"):
        self.mode, self.hits, self.runner, self.url, self.auth = mode, 0, None, None, None

    async def metrics(self, request):
        self.hits += 1
        self.auth = request.headers.get("Authorization")
        if self.mode == "404":
            raise web.HTTPNotFound()
        if self.mode == "flaky" and self.hits in (2, 3):
            return web.Response(status=500, text="busy")
        if self.mode == "hang" and self.hits == 2:
            await asyncio.sleep(2)
        if self.mode == "garbage":
            return web.Response(text="<html>not metrics {{{</html>")
        return web.Response(text=exposition(self.hits), content_type="text/plain")

    async def __aenter__(self):
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, HOST, 0)
        await site.start()
        self.url = f"http://{HOST}:{self.runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc):
        await self.runner.cleanup()


async def test_rows_gauges_every_scrape_counters_when_changed(tmp_path):
    async with Endpoint() as ep:
        sc = ServerMetricsScraper(ep.url, tmp_path, interval_s=0.05)
        await sc.start()                                 # scrape 1 (full)
        deadline = time.monotonic() + 20
        while ep.hits < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await sc.mark("measure_start")                   # a full scrape
        info = await sc.stop()                           # and a last full one
    rows = read_rows(tmp_path / FILE)
    ok = [r for r in rows if r["name"] == "loadgen:scrape" and r["labels"]["status"] == "ok"]
    assert info["status"] == "measured" and info["scrapes_ok"] == len(ok) == ep.hits
    assert info["rows"] == len(rows) and info["parse_ms_mean"] is not None
    running = [r for r in rows if r["name"] == "vllm:num_requests_running"]
    assert [r["value"] for r in running] == list(range(1, ep.hits + 1))   # every scrape
    assert [r["t_ns"] for r in running] == [r["t_ns"] for r in ok]
    # the counter (10 * (n // 2) at scrape n) is written when it changed and at full scrapes
    # (first, mark, last) only: fewer rows than scrapes, yet every value it took is there
    gen = [r["value"] for r in rows if r["name"] == "vllm:generation_tokens_total"]
    n = ep.hits
    assert len(gen) < n and gen == sorted(gen)
    assert set(gen) == {10.0 * (k // 2) for k in range(1, n + 1)} and gen[-1] == 10.0 * (n // 2)
    marks = [r for r in rows if r["name"] == "loadgen:mark"]
    assert marks[0]["labels"] == {"mark": "measure_start"}
    assert not any(r["name"].startswith("process_") or r["name"].endswith("_created") for r in rows)
    buckets = [r for r in rows if r["name"].endswith("_bucket")]
    assert {r["labels"]["le"] for r in buckets} == {"0.1", "+Inf"}


@pytest.mark.parametrize("mode, reason", [("404", "HTTP 404"), ("garbage", "not Prometheus")])
async def test_no_metrics_endpoint_is_unavailable_after_one_get(tmp_path, mode, reason):
    async with Endpoint(mode) as ep:
        async with ServerMetricsScraper(ep.url, tmp_path, interval_s=0.02) as sc:
            await asyncio.sleep(0.2)
            await sc.mark("measure_start")
    info = sc.describe()
    assert ep.hits == 1 and info["status"] == "unavailable" and reason in info["reason"]
    assert info["reason"].startswith(f"GET {ep.url}/metrics")


async def test_errors_and_a_hung_scrape_never_stop_the_run(tmp_path):
    async with Endpoint("flaky") as ep:
        async with ServerMetricsScraper(ep.url, tmp_path, interval_s=0.05) as sc:
            deadline = time.monotonic() + 20
            while ep.hits < 6 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
    info = sc.describe()
    assert info["status"] == "measured" and info["scrapes_failed"] == 2
    assert info["first_error"] == "HTTP 500" and info["scrapes_ok"] >= 4
    async with Endpoint("hang") as ep:
        t = time.monotonic()
        sc = ServerMetricsScraper(ep.url, tmp_path / "hang", interval_s=0.1, timeout_s=0.3)
        await sc.start()
        while ep.hits < 3 and time.monotonic() - t < 20:
            await asyncio.sleep(0.02)
        await sc.stop()
    assert "TimeoutError" in sc.describe()["first_error"] and time.monotonic() - t < 10


async def test_disk_bound(tmp_path):
    async with Endpoint() as ep:
        async with ServerMetricsScraper(ep.url, tmp_path, interval_s=0.02, max_bytes=3000) as sc:
            while ep.hits < 10:
                await asyncio.sleep(0.02)
    info = sc.describe()
    assert info["truncated"] and info["bytes"] <= 3000
    assert (tmp_path / FILE).stat().st_size == info["bytes"]


async def test_scraping_runs_in_its_own_process_not_the_clients(tmp_path):
    """GET + parse + write happen in a child process (its own GIL), found by its command line;
    the API key travels on its stdin, never on its argv; stopped with the run, no leftovers.
    A full URL in ``path`` scrapes a server whose metrics live elsewhere."""
    import os
    import psutil
    async with Endpoint() as ep:
        sc = ServerMetricsScraper("http://127.0.0.1:9", tmp_path, interval_s=0.05,
                                  path=ep.url + "/metrics", api_key="sk-secret")
        await sc.start()
        workers = [p for p in psutil.Process().children()
                   if "loadgen.targets.scrape_worker" in " ".join(p.cmdline())]
        assert len(workers) == 1 and "sk-secret" not in " ".join(workers[0].cmdline())
        while ep.hits < 3:
            await asyncio.sleep(0.02)
        await sc.mark("measure_start")
        info = await sc.stop()
    assert ep.auth == "Bearer sk-secret" and info["url"] == ep.url + "/metrics"
    assert info["isolation"] == "process" and info["worker_pid"] == workers[0].pid
    assert info["worker_pid"] != os.getpid() and info["worker_exit_code"] == 0
    assert info["worker_error"] is None and info["worker_cpu_s"] is not None
    assert info["scrapes_ok"] == ep.hits and info["rows"] > 0
    assert not workers[0].is_running() or workers[0].status() == psutil.STATUS_ZOMBIE
    assert "sk-secret" not in (tmp_path / FILE).read_text()


def test_worker_exits_when_its_client_is_gone(tmp_path):
    """EOF on the worker's stdin (the client process died): it closes its file and exits."""
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-m", "loadgen.targets.scrape_worker"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    cfg = {"url": "http://127.0.0.1:9/metrics", "out": str(tmp_path / FILE), "interval_s": 0.05}
    p.stdin.write((json.dumps(cfg) + "\n").encode())
    p.stdin.flush()
    started = json.loads(p.stdout.readline())
    assert started["event"] == "started" and "ConnectionRefusedError" in started["describe"][
        "first_error"]
    p.stdin.close()
    assert p.wait(timeout=30) == 0
    rows = read_rows(tmp_path / FILE)
    assert rows and all(r["name"] == "loadgen:scrape" for r in rows)


# ---- against the real JAX server (vLLM's metric names) ----------------------------------------
@pytest.fixture(scope="module")
def jax_url(tmp_path_factory, jax_cache_dir):
    """Its own server: 2 slots (the session's shared one has 4), the session's compilation cache."""
    from tests.servers.jax.server_proc import started
    with started(tmp_path_factory.mktemp("jax-metrics"), ["--slots", "2", "--seed", "0"],
                 jax_cache_dir) as srv:
        yield srv.base_url


def test_loadgen_run_scrapes_the_jax_server(jax_url, tmp_path):
    from loadgen.run.runner import run_scenario
    from loadgen.scenario.loader import scenario_from_dict
    sc = scenario_from_dict({
        "name": "scrape", "target": {"url": jax_url, "metrics_interval_s": 0.05},
        "api": {"continuous_usage": True},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 24},
                     "output_tokens": {"dist": "fixed", "value": 64}},
        "load": {"mode": "concurrency", "concurrency": 4, "num_requests": 6,
                 "warmup_requests": 2},
        "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}})
    res = run_scenario(sc)
    d = res.run_dir
    rows = read_rows(d / FILE)
    names = {r["name"] for r in rows}
    for n in ("vllm:num_requests_running", "vllm:num_requests_waiting",
              "vllm:kv_cache_usage_perc", "vllm:time_to_first_token_seconds_sum",
              "vllm:request_decode_time_seconds_count", "vllm:generation_tokens_total"):
        assert n in names, n
    meta = json.loads((d / "meta.json").read_text())
    assert meta["server_metrics"]["status"] == "measured" and meta["server_metrics"]["rows"] > 0
    marks = [r for r in rows if r["name"] == "loadgen:mark"]
    assert [m["labels"]["mark"] for m in marks] == ["measure_start", "measure_end"]
    assert marks[0]["t_ns"] <= meta["t0_ns"] and marks[1]["t_ns"] >= meta["end_ns"]
    sm = server_metrics_summary(d)
    f = sm["figures"]
    # the server saw exactly the 6 measured requests of 64 output tokens (warm-up before t0)
    assert f["server_ttft"]["count"] == 6 and f["server_e2e"]["count"] == 6
    assert f["server_generation_tokens"]["value"] == 6 * 64
    assert f["server_prompt_tokens"]["value"] == 6 * 24
    # 4 in flight on 2 slots for most of the window: both slots busy at some scrape; never more
    # waiting than the client has in flight (a finished request may hold its slot a moment)
    assert f["max_running"]["value"] == 2 and f["max_waiting"]["value"] <= 4
    assert f["max_running"]["samples"] >= 3
    dec = sm["ttft_decomposition"]
    assert dec["status"] == "calculated" and dec["client_requests"] == 6
    # client TTFT includes the server's: network/client part cannot be much below 0
    assert dec["network_client_ms"] > -5.0
