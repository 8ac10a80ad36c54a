"""Locust streaming user for bench.client_capacity: a locustfile (`locust -f bench/locust_streaming.py`),
never imported by another module (importing locust patches the process with gevent; no aiohttp here).

Each user posts a streaming /v1/completions request through FastHttpUser and reads the SSE
stream event by event (``readline(b"\\n\\n")`` on the raw response, not iter_content, which
waits for 1024 bytes), stamping and JSON-parsing every event like our client does.
Counts requests and tokens that end inside the measurement window
[start + BENCH_WARM_S, + BENCH_DURATION_S] and the process CPU time over it; writes them as JSON
to BENCH_OUT when the window closes.
"""
import json
import os
import time

import gevent
from locust import FastHttpUser, constant, events, task

TOKENS = int(os.environ.get("BENCH_TOKENS", "128"))
WARM_S = float(os.environ.get("BENCH_WARM_S", "1.5"))
DURATION_S = float(os.environ.get("BENCH_DURATION_S", "3"))
OUT = os.environ.get("BENCH_OUT", "locust_result.json")
BODY = json.dumps({"model": "calib-model", "prompt": "hello", "max_tokens": TOKENS, "stream": True,
                   "stream_options": {"include_usage": True}, "ignore_eos": True})
HEADERS = {"Content-Type": "application/json"}
STATE = {"t0": None, "t1": None, "tokens": 0, "requests": 0, "errors": 0}


def _window() -> None:
    gevent.sleep(WARM_S)
    STATE["t0"] = time.perf_counter_ns()
    cpu0 = time.process_time()
    gevent.sleep(DURATION_S)
    STATE["t1"] = time.perf_counter_ns()
    STATE["cpu_s"] = time.process_time() - cpu0
    STATE["wall_s"] = (STATE["t1"] - STATE["t0"]) / 1e9
    with open(OUT, "w") as f:
        json.dump(STATE, f)


@events.test_start.add_listener
def _start(environment, **kw):
    gevent.spawn(_window)


class StreamingUser(FastHttpUser):
    wait_time = constant(0)
    network_timeout = 30.0
    connection_timeout = 30.0

    @task
    def generate(self):
        resp = self.client.post("/v1/completions", data=BODY, headers=HEADERS, stream=True)
        raw = resp._response
        if raw is None or resp.status_code != 200:
            STATE["errors"] += 1
            return
        n = 0
        first = None
        while True:
            ev = raw.readline(b"\n\n")
            if not ev:
                break
            t = time.perf_counter_ns()
            if ev.startswith(b"data: [DONE]"):
                continue
            if ev.startswith(b"data: "):
                obj = json.loads(ev[6:])
                ch = obj.get("choices")
                if ch and ch[0].get("text"):
                    n += 1
                    if first is None:
                        first = t
        end = time.perf_counter_ns()
        t0, t1 = STATE["t0"], STATE["t1"]
        if t0 is not None and t1 is None and end >= t0:
            STATE["requests"] += 1
            STATE["tokens"] += n
