"""`loadgen run` of a small embeddings scenario end to end: loadgen starts the real JAX server
(tiny preset) on 127.0.0.1, sends POST /v1/embeddings of 3 texts each, and the run directory holds
records without token timings, summary.json's "embeddings" figures, a report that shows them (and
no empty TTFT/TPOT/ITL rows) and the console line."""
import json

import pytest

from analysis.contract import validate_run_dir
from tests.loadgen.run.jax_e2e import jax_scenario, run_scenario_cli

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

SCENARIO = jax_scenario("embeddings-e2e", "embeddings", {
    "prompt_tokens": {"dist": "uniform", "min": 8, "max": 64}, "inputs_per_request": 3})


def test_loadgen_run_embeddings_against_the_jax_server(tmp_path, capsys):
    d, recs = run_scenario_cli(tmp_path, SCENARIO, "embeddings")
    out = capsys.readouterr().out
    measured = [r for r in recs if r["phase"] == "measured"]
    assert len(recs) == 9 and len(measured) == 8
    for r in recs:
        assert r["status"] == "ok" and r["http_status"] == 200, r
        assert r["inputs"] == 3 and r["requested_output_tokens"] is None
        assert r["first_token_at_ns"] is None and r["first_chunk_at_ns"] is None
        assert r["chunks"] == [] and r["output_tokens"] is None
        # the ByteTokenizer server's usage equals the workload's exact byte count
        assert r["prompt_tokens_source"] == "usage"
        assert r["prompt_tokens"] == r["workload_prompt_tokens"]
        assert r["end_at_ns"] > r["sent_at_ns"]
    s = json.loads((d / "summary.json").read_text())
    e = s["embeddings"]
    assert e["latency_ms"]["count"] == 8 and 0 < e["latency_ms"]["p50"] <= e["latency_ms"]["p99"]
    assert e["inputs_per_request"] == 3.0 and e["prompt_tokens_source"] == {"usage": 8}
    assert abs(e["input_throughput"] - 3 * e["request_throughput"]) < 1e-6 * e["input_throughput"]
    assert e["input_token_throughput"] > e["input_throughput"]
    assert s["ttft_ms"]["count"] == 0 and s["ttft_ms"]["p50"] is None      # absent, never 0
    assert s["tpot_ms"]["p50"] is None and s["itl_ms"]["p50"] is None
    assert s["requests_completed"] == 8
    meta = json.loads((d / "meta.json").read_text())
    assert meta["endpoint"] == "embeddings" and meta["probe"]["status"] in ("ok", "warning")
    assert meta["probe"]["context"]["largest_request"] <= 64
    md = (d / "report.md").read_text()
    client_part = md[md.index("## Headline"):md.index("## Distributions")]   # the client's figures
    assert "inputs embedded per second" in client_part and "input throughput (tokens/s)" in md
    assert "latency p50 / p90 / p99 (ms)" in client_part and "E2E from send" in client_part
    for word in ("TTFT", "TPOT", "ITL", "chunk gap"):       # no empty token-latency rows
        assert word not in client_part, word
    assert "embeddings: latency p50" in out and "inputs/s" in out and "TTFT ms" not in out
    assert validate_run_dir(d) == []
