"""load.cancel against the real JAX server (the session's, tiny preset): the client hangs up
mid-stream, the server frees the slot and KV blocks of each request whose client went away
(servers/jax/api.py: the handler is cancelled, Generation.close cancels it in the engine),
the run's own check (loadgen.run.running_after) finds vllm:num_requests_running back at 0, and
the requests sent after the aborted ones (on the freed slots) still run to the end."""
import json

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from tests.servers.jax.server_proc import metrics
from tests.support.hangups import assert_hung_up

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

TOKENS = 160


def test_aborted_streams_free_the_jax_servers_slots(jax_url, tmp_path):
    abort = 'vllm:request_success_total{"finished_reason": "abort"}'
    before = metrics(jax_url)
    sc = scenario_from_dict({
        "name": "hang-jax", "target": {"url": jax_url},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                     "output_tokens": {"dist": "fixed", "value": TOKENS}, "seed": 5},
        "load": {"mode": "concurrency", "concurrency": 4, "num_requests": 10,
                 "cancel": {"fraction": 0.5, "after_tokens": 2}},
        "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}})
    res = run_scenario(sc)
    recs = {r["id"]: r for r in read_records(res.run_dir / "records.jsonl")}
    assert_hung_up(sc, recs, 10, 2, TOKENS)         # the slots the aborted ones held: reused
    summary = json.loads((res.run_dir / "summary.json").read_text())
    after = summary["cancel"]["server_running_after"]
    assert (after["metric"], after["value"], after["leaked"]) == (
        "vllm:num_requests_running", 0, False), after
    now = metrics(jax_url)
    assert now["vllm:num_requests_running"] == 0 and now["vllm:kv_cache_usage_perc"] == 0
    assert now[abort] - before[abort] >= 1           # the server ended them as aborted
    generated = now["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    assert generated < 10 * TOKENS                   # ... without decoding them to the end
