"""loadgen/targets/prometheus_text.py: the fast exposition parser gives prometheus_client's
answers (hand-written texts, what prometheus_client writes, a vLLM-sized exposition, real
servers' bodies)."""
import json
import math
from pathlib import Path

import pytest

from loadgen.targets.prometheus_text import (SKIP_PREFIXES, _fast, parse_samples,
                                             parse_samples_reference)
from tests.loadgen.targets.test_scrape import exposition
from servers.vllm.metrics_fake import exposition as vllm_like


def test_parse_samples_drops_created_and_process_metrics():
    s = parse_samples(exposition(3))
    names = [x[0] for x in s]
    assert "vllm:generation_tokens_total" in names and "vllm:time_to_first_token_seconds_sum" in names
    assert not any(n.endswith("_created") or n.startswith("process_") for n in names)
    gauge = [x for x in s if x[0] == "vllm:num_requests_running"]
    assert gauge == [("vllm:num_requests_running", {"model_name": "m"}, 3.0, True)]


def _prometheus_client_text() -> str:
    """What prometheus_client itself writes (vLLM's /metrics is made by it): every metric type,
    label values with quotes, backslashes and newlines (escaped), info, enum, summary."""
    from prometheus_client import (CollectorRegistry, Counter, Enum, Gauge, Histogram, Info,
                                   Summary, generate_latest)
    r = CollectorRegistry()
    c = Counter("vllm:prompt_tokens", "p", ["model_name", "engine"], registry=r)
    c.labels("m", "0").inc(7)
    Gauge("vllm:num_requests_running", "g", ["model_name"], registry=r).labels("m").set(3)
    h = Histogram("vllm:time_to_first_token_seconds", "h", ["model_name"], registry=r,
                  buckets=(0.001, 0.01, 0.1, 1.0))
    for v in (0.0005, 0.05, 0.5, 5.0):
        h.labels("m").observe(v)
    Summary("req_size", "s", registry=r).observe(3)
    Info("build", "i", registry=r).info({"version": "0.32.0", "path": 'C:\\x "q"\nz'})
    Enum("state", "e", states=["a", "b"], registry=r).state("b")
    Gauge("odd", "g", ["v"], registry=r).labels('say "hi", {ok}').set(1)
    return generate_latest(r).decode()


@pytest.mark.parametrize("text", [
    exposition(3), _prometheus_client_text(),
    "# a comment\nuntyped_metric 1\n# TYPE x counter\nx_total 2 1700000000000\nx 3\n",
    "# HELP y help\ny{a=\"1\",} 4\n# TYPE z gauge\nz +Inf\nz_other NaN\n",
    "# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 5\n"
    "# TYPE python_info gauge\npython_info{v=\"3\"} 1\n"])
def test_fast_parser_gives_prometheus_clients_answers(text):
    got, want = parse_samples(text), parse_samples_reference(text)
    norm = [(n, lb, "nan" if math.isnan(v) else v, g) for n, lb, v, g in got]
    assert norm == [(n, lb, "nan" if math.isnan(v) else v, g) for n, lb, v, g in want]


def test_fast_parser_on_a_vllm_sized_exposition():
    text = vllm_like(5)
    assert len(text.splitlines()) > 550
    assert _fast(text, SKIP_PREFIXES) == parse_samples_reference(text)   # no fallback needed


def _recorded_metrics() -> list:
    """The /metrics bodies recorded from real servers (tests/fixtures/servers/*/metrics.json)."""
    out = []
    for f in sorted(Path(__file__).resolve().parents[2].glob("fixtures/servers/*/metrics.json")):
        r = json.loads(f.read_text())["response"]
        if str(r.get("status")) == "200":
            out.append(pytest.param("".join(c["text"] for c in r["chunks"]), id=f.parent.name))
    return out or [pytest.param("", id="none-recorded")]


@pytest.mark.parametrize("text", _recorded_metrics())
def test_fast_parser_on_real_servers_metrics(text):
    """Real vLLM 0.32 (CPU build) and llama.cpp bodies: the fast path answers alone, exactly."""
    assert _fast(text, SKIP_PREFIXES) == parse_samples_reference(text)
