"""`loadgen run` of a small Responses API scenario end to end: loadgen starts the real JAX server (tiny
preset) on 127.0.0.1, sends POST /v1/responses (input, max_output_tokens, stream), and the run
directory holds records whose first token is the first response.output_text.delta, usage-sourced
counts and a summary with TTFT/TPOT as for chat; a bad combination is refused in one line (the
Locust engine's run: tests/loadgen/engine/locust/test_locust_endpoints.py)."""
import json

import pytest
from pathlib import Path

from analysis.contract import validate_run_dir
from loadgen.scenario.loader import load_scenario, scenario_from_dict
from loadgen.scenario.model import ScenarioError
from tests.loadgen.run.jax_e2e import jax_scenario, run_scenario_cli

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = jax_scenario("responses-e2e", "responses", {
    "prompt_tokens": {"dist": "uniform", "min": 8, "max": 32},
    "output_tokens": {"dist": "uniform", "min": 4, "max": 12}})


def test_loadgen_run_responses_against_the_jax_server(tmp_path, capsys):
    d, recs = run_scenario_cli(tmp_path, SCENARIO, "responses")
    measured = [r for r in recs if r["phase"] == "measured"]
    assert len(recs) == 9 and len(measured) == 8
    for r in recs:
        assert r["status"] == "ok" and r["http_status"] == 200, r
        # ignore_eos: every answer runs to max_output_tokens, which ends in response.incomplete
        assert r["finish_reason"] == "length"
        assert r["output_tokens"] == r["requested_output_tokens"] and r["output_tokens_source"] == "usage"
        assert r["prompt_tokens_source"] == "usage"
        tokens = [t for t, n in r["chunks"] if n]
        # a later chunk than response.created's, stamped no earlier (one late read may carry
        # both events: one kernel stamp for both, so equal stamps are right)
        assert next(i for i, (_, n) in enumerate(r["chunks"]) if n) >= 1
        assert r["first_token_at_ns"] == tokens[0] >= r["first_chunk_at_ns"] == r["chunks"][0][0]
        assert r["chunks"][0][1] == 0                             # response.created carries no token
    s = json.loads((d / "summary.json").read_text())
    assert s["requests_completed"] == 8
    assert s["ttft_ms"]["count"] == 8 and 0 < s["ttft_ms"]["p50"] <= s["ttft_ms"]["p99"]
    assert s["tpot_ms"]["p50"] is not None and s["tpot_ms"]["p50"] > 0
    meta = json.loads((d / "meta.json").read_text())
    assert meta["endpoint"] == "responses" and meta["probe"]["status"] in ("ok", "warning")
    assert "TTFT" in capsys.readouterr().out
    assert validate_run_dir(d) == []


def test_continuous_usage_is_refused():
    tree = {**SCENARIO, "target": {"url": "http://127.0.0.1:9"},
            "api": {"endpoint": "responses", "continuous_usage": True}}
    try:
        scenario_from_dict(tree)
    except ScenarioError as e:
        assert "continuous_usage" in str(e) and "\n" not in str(e)
    else:
        raise AssertionError("continuous_usage with responses was accepted")


def test_shipped_scenario():
    sc = load_scenario(ROOT / "scenarios/responses.yaml")
    assert sc.api.endpoint == "responses" and sc.api.stream and sc.target.server.kind == "jax"
