"""A stand-in for vLLM's /metrics and /version, ~600 lines of exposition like vLLM 0.32's.

Names, label sets and bucket edges are vLLM's (vllm/v1/metrics/loggers.py and buckets.py of the
0.32 CPU build; the model_name + engine labels), plus the python_* / process_* and http_*
families that vLLM's API server also exposes (prometheus-fastapi-instrumentator). Values move
at every GET: gauges follow the GET count, counters and histograms grow, so a scraper writes
changed rows like it would against a live vLLM.

    python -m servers.vllm.metrics_fake --port 0 [--calibration]
        prints "PORT n"; GET /metrics, GET /version ({"version": VERSION});
        --calibration: also the calibration server's OpenAI routes (tests/support), so one
        process is a whole target (the Locust engine's test).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Optional

from aiohttp import web

from servers.port_server import PortServer, serve_app

VERSION = "0.32.0-fake"
MODEL = "calib-model"
LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
       20.0, 40.0, 80.0)
ITER_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQ_TOKENS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)      # build_1_2_5 up to 2048
PARAMS_N = (1, 2, 5, 10, 20)
PREEMPT = (1, 2, 3, 4, 5, 10, 20)
HISTOGRAMS = (  # name, help, buckets
    ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", REQ_TOKENS),
    ("vllm:request_generation_tokens", "Number of generation tokens processed.", REQ_TOKENS),
    ("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITER_TOKENS),
    ("vllm:request_max_num_generation_tokens", "Max generation tokens in a sequence group.",
     REQ_TOKENS),
    ("vllm:request_params_n", "Histogram of the n request parameter.", PARAMS_N),
    ("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
     REQ_TOKENS),
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL),
    ("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds.",
     ITL),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", LATENCY),
    ("vllm:request_queue_time_seconds", "Time spent in WAITING phase for request.", LATENCY),
    ("vllm:request_inference_time_seconds", "Time spent in RUNNING phase for request.", LATENCY),
    ("vllm:request_prefill_time_seconds", "Time spent in PREFILL phase for request.", LATENCY),
    ("vllm:request_decode_time_seconds", "Time spent in DECODE phase for request.", LATENCY),
    ("vllm:request_num_preemptions", "Number of preemptions per request.", PREEMPT),
    ("vllm:request_prefill_kv_computed_tokens", "New KV tokens computed during prefill.",
     REQ_TOKENS),
)
COUNTERS = ("vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens",
            "vllm:prompt_tokens_cached", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
            "vllm:external_prefix_cache_queries", "vllm:external_prefix_cache_hits",
            "vllm:mm_cache_queries", "vllm:mm_cache_hits", "vllm:corrupted_requests")
GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
          "vllm:engine_sleep_state")
HANDLERS = ("/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics",
            "/version", "/tokenize", "/detokenize", "/ping", "/load")
HIGHR = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5,
         5.0, 7.5, 10.0, 30.0, 60.0)
HTTP_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0,
                60.0)


def _le(b: float) -> str:
    return repr(float(b))


def exposition(n: int) -> str:
    """The text at GET number ``n`` (1, 2, ...): ~600 lines, values growing with n."""
    lab = f'engine="0",model_name="{MODEL}"'
    out = []
    for i, g in enumerate(("python_gc_objects_collected", "python_gc_objects_uncollectable",
                           "python_gc_collections")):
        out.append(f"# HELP {g}_total Objects collected during gc\n# TYPE {g}_total counter")
        out += [f'{g}_total{{generation="{k}"}} {100 * n + k + i}.0' for k in range(3)]
    out.append('# HELP python_info Python platform information\n# TYPE python_info gauge\n'
               'python_info{implementation="CPython",major="3",minor="12",patchlevel="3",'
               'version="3.12.3"} 1.0')
    for p, v in (("virtual_memory_bytes", 9.8e9), ("resident_memory_bytes", 1.9e9),
                 ("start_time_seconds", 1.7e9), ("cpu_seconds_total", 10.0 + n),
                 ("open_fds", 120.0), ("max_fds", 1048576.0)):
        out.append(f"# HELP process_{p} x\n# TYPE process_{p} "
                   f"{'counter' if p.endswith('total') else 'gauge'}\nprocess_{p} {v}")
    for h in HANDLERS:     # prometheus-fastapi-instrumentator, as vLLM's API server exposes
        out.append(f'http_requests_total{{handler="{h}",method="GET",status="2xx"}} {n}.0')
        out.append(f'http_request_size_bytes_sum{{handler="{h}"}} {64.0 * n}')
        out.append(f'http_response_size_bytes_sum{{handler="{h}"}} {512.0 * n}')
    out.append("# TYPE http_request_duration_seconds histogram")
    out.append("# TYPE http_request_duration_highr_seconds histogram")
    out += [f'http_request_duration_highr_seconds_bucket{{le="{_le(b)}"}} {float(n)}'
            for b in HIGHR]
    out += [f'http_request_duration_highr_seconds_bucket{{le="+Inf"}} {float(n)}',
            f"http_request_duration_highr_seconds_count {float(n)}",
            f"http_request_duration_highr_seconds_sum {0.2 * n}"]
    for h in HANDLERS[:6]:
        for b in HTTP_BUCKETS:
            out.append(f'http_request_duration_seconds_bucket{{handler="{h}",le="{_le(b)}",'
                       f'method="POST"}} {n * (1 if b >= 0.1 else 0)}.0')
        out.append(f'http_request_duration_seconds_bucket{{handler="{h}",le="+Inf",'
                   f'method="POST"}} {n}.0')
        out.append(f'http_request_duration_seconds_count{{handler="{h}",method="POST"}} {n}.0')
        out.append(f'http_request_duration_seconds_sum{{handler="{h}",method="POST"}} '
                   f'{0.2 * n}')
    for g in GAUGES:
        v = (n % 7) / 10 if g.endswith("perc") else float(n % 5)
        out.append(f"# HELP {g} gauge\n# TYPE {g} gauge\n{g}{{{lab}}} {v}")
    out.append('# TYPE vllm:num_requests_waiting_by_reason gauge')
    out += [f'vllm:num_requests_waiting_by_reason{{{lab},reason="{r}"}} 0.0'
            for r in ("capacity", "deferred")]
    for c in COUNTERS:
        out.append(f"# HELP {c}_total counter\n# TYPE {c}_total counter\n"
                   f"{c}_total{{{lab}}} {float(n * 37)}\n{c}_created{{{lab}}} 1.7e9")
    out.append("# TYPE vllm:request_success_total counter")
    for reason in ("stop", "length", "abort", "error", "repetition"):
        out.append(f'vllm:request_success_total{{{lab},finished_reason="{reason}"}} '
                   f'{float(n if reason == "length" else 0)}')
    for name, help_, buckets in HISTOGRAMS:
        out.append(f"# HELP {name} {help_}\n# TYPE {name} histogram")
        total = 4 * n
        for i, b in enumerate(buckets):
            out.append(f'{name}_bucket{{{lab},le="{_le(b)}"}} '
                       f'{float(min(total, total * (i + 1) // len(buckets)))}')
        out.append(f'{name}_bucket{{{lab},le="+Inf"}} {float(total)}')
        out.append(f"{name}_count{{{lab}}} {float(total)}")
        out.append(f"{name}_sum{{{lab}}} {0.05 * total}")
        out.append(f"{name}_created{{{lab}}} 1.7e9")
    out.append('# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size="16",'
               'cache_dtype="auto",enable_prefix_caching="True",engine="0",'
               'num_cpu_blocks="None",num_gpu_blocks="4096"} 1.0')
    return "\n".join(out) + "\n"


def make_app(calibration: bool = False) -> web.Application:
    if calibration:
        from servers.calib import make_app as calib_app
        app = calib_app()
    else:
        app = web.Application()
    hits = {"n": 0}

    async def metrics(request):
        hits["n"] += 1
        return web.Response(text=exposition(hits["n"]), content_type="text/plain",
                            charset="utf-8")

    async def version(request):
        return web.json_response({"version": VERSION})
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/version", version)
    return app


class FakeVllmMetrics(PortServer):
    """``with FakeVllmMetrics(calibration=True) as s: s.url`` — a subprocess on 127.0.0.1."""

    label = "fake vLLM metrics server"

    def __init__(self, calibration: bool = False):
        argv = [sys.executable, "-m", "servers.vllm.metrics_fake", "--port", "0"]
        super().__init__(argv + (["--calibration"] if calibration else []), 30.0)

def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--calibration", action="store_true")
    a = ap.parse_args(argv)
    try:
        asyncio.run(serve_app(make_app(a.calibration), a.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
