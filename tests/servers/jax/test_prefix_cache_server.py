"""The real JAX server with ``--prefix-cache on`` end to end: usage.prompt_tokens_details.cached_tokens
(streamed usage chunk and whole answer), the same text on a hit as on a miss, vllm:prefix_cache_*
counters in tokens, POST /reset_prefix_cache; then `loadgen run` with prefix groups against it:
records carry cached_tokens, summary.json prefix_cache has the server's hit rate from /metrics and
the TTFT of hits vs misses (printed: measured, never asserted). With the cache off (the session
server) the answers say nothing and the route is 404."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.servers.jax.server_proc import started


def post(base: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(base + path, data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def complete(base: str, prompt: str, stream: bool) -> tuple[str, dict]:
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 8, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    status, raw = post(base, "/v1/completions", body)
    assert status == 200, raw
    if not stream:
        obj = json.loads(raw)
        return obj["choices"][0]["text"], obj["usage"]
    text, usage = "", None
    for line in raw.decode().splitlines():
        if line.startswith("data: {"):
            obj = json.loads(line[6:])
            text += "".join(c.get("text") or "" for c in obj["choices"])
            usage = obj.get("usage") or usage
    return text, usage


def counters(base: str) -> dict[str, float]:
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        out = {}
        for line in r.read().decode().splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name.startswith("vllm:prefix_cache_"):
                out[name] = float(line.rsplit(" ", 1)[1])
        return out


@pytest.fixture(scope="module")
def prefix_server(tmp_path_factory, jax_cache_dir):
    with started(tmp_path_factory.mktemp("jax-prefix"),
                 ["--slots", "2", "--seed", "0", "--prefix-cache", "on"], jax_cache_dir) as srv:
        yield srv


@pytest.mark.slow          # its own server's warm-up (~1-4 min on a shared 2-core host)
def test_cached_tokens_counters_reset_and_same_text(prefix_server):
    base = prefix_server.base_url
    prompt = "The quick brown fox jumps over the lazy dog. " * 3           # 135 bytes
    text0, u0 = complete(base, prompt, stream=False)
    assert u0["prompt_tokens_details"] == {"cached_tokens": 0}
    n = u0["prompt_tokens"]
    text1, u1 = complete(base, prompt, stream=True)                      # the usage chunk
    assert u1["prompt_tokens_details"]["cached_tokens"] == (n - 1) // 16 * 16 > 0
    assert text1 == text0                                                # hit == miss, greedy
    c = counters(base)
    assert c["vllm:prefix_cache_queries_total"] == 2 * n
    assert c["vllm:prefix_cache_hits_total"] == (n - 1) // 16 * 16
    status, raw = post(base, "/reset_prefix_cache")
    assert status == 200 and json.loads(raw)["blocks_forgotten"] >= 1
    text2, u2 = complete(base, prompt, stream=False)
    assert u2["prompt_tokens_details"]["cached_tokens"] == 0 and text2 == text0
    with urllib.request.urlopen(base + "/info", timeout=10) as r:
        assert json.loads(r.read())["prefix_cache"]["block"] == 16


def test_cache_off_says_nothing(jax_server):
    _, usage = complete(jax_server.base_url, "hello there, prefix cache", stream=True)
    assert "prompt_tokens_details" not in usage
    assert post(jax_server.base_url, "/reset_prefix_cache")[0] == 404
    assert counters(jax_server.base_url) == {}


@pytest.mark.slow
def test_loadgen_run_with_prefix_groups(prefix_server, tmp_path, capsys):
    from analysis.contract import validate_run_dir
    from tests.loadgen.run.jax_e2e import run_scenario_cli

    post(prefix_server.base_url, "/reset_prefix_cache")
    sc = {"name": "prefix-e2e", "target": {"url": prefix_server.base_url},
          "api": {"endpoint": "completions"},
          "workload": {"tokenizer": "bytes", "seed": 1,
                       "prefix": {"groups": 4, "tokens": 160, "popularity": "uniform"},
                       "prompt_tokens": {"dist": "fixed", "value": 24},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 16}}
    d, recs = run_scenario_cli(tmp_path, sc, "prefix")
    assert all(r["status"] == "ok" for r in recs)
    cached = [r["cached_tokens"] for r in recs]
    assert all(c is not None for c in cached)
    assert any(c == 0 for c in cached) and any(c >= 160 // 16 * 16 - 16 for c in cached)
    s = json.loads((d / "summary.json").read_text())
    pc = s["prefix_cache"]
    assert pc["requests_hit"] + pc["requests_miss"] == 16 and pc["requests_hit"] >= 1
    assert pc["server_hit_rate"] is not None and 0 < pc["server_hit_rate"] < 1, pc
    assert pc["cached_prompt_fraction"] == pytest.approx(
        sum(cached) / sum(r["prompt_tokens"] for r in recs))
    assert pc["ttft_ms_p50_hit"] is not None and pc["ttft_ms_p50_miss"] is not None
    assert validate_run_dir(d) == []
    with capsys.disabled():                                              # measured, not asserted
        print(f"\nprefix-cache e2e (tiny, CPU): hits {pc['requests_hit']} misses "
              f"{pc['requests_miss']} TTFT p50 hit {pc['ttft_ms_p50_hit']:.1f} ms vs miss "
              f"{pc['ttft_ms_p50_miss']:.1f} ms (prompt ~{pc['prompt_tokens_mean_hit']:.0f} tokens); "
              f"server hit rate {pc['server_hit_rate']:.3f}")
