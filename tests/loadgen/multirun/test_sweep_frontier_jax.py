"""The frontier and the max-concurrency search against the real JAX server (the session's tiny
preset, 4 slots): a model that batches, so the figures come from a real engine. Slow (the
server compiles once per session): ``pytest -m slow tests/loadgen/multirun/test_sweep_frontier_jax.py``."""
import json

import pytest

from analysis.metrics.frontier import on_frontier
from loadgen.multirun.sweep import run_sweep
from loadgen.scenario.loader import scenario_from_dict


def tree(tmp_path, url, sweep, name):
    return {"name": name, "target": {"url": url, "accelerators": 1},
            "api": {"endpoint": "completions", "stream": True},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 8}},
            "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 6},
            "slo": {"tpot_ms": 500}, "sweep": sweep,
            "output": {"dir": str(tmp_path), "run_name": name, "report": "text"}}


@pytest.mark.slow
def test_frontier_of_a_jax_concurrency_sweep(jax_url, tmp_path):
    d, res = run_sweep(scenario_from_dict(tree(tmp_path, jax_url, {
        "param": "load.concurrency", "values": [1, 4]}, "jax-frontier")))
    fr = json.loads((d / "frontier.json").read_text())
    assert [p["value"] for p in fr["points"]] == [1, 4]
    for p in fr["points"]:
        s = json.loads((d / p["run"] / "summary.json").read_text())
        assert s["requests_completed"] == 6
        assert p["x"] == s["interactivity_tok_s"]["p50"] > 0
        assert s["interactivity_tok_s"]["p10"] <= s["interactivity_tok_s"]["p50"]
        assert p["y"] == s["output_throughput_per_accelerator"] == s["output_throughput"]
    assert [p["on_frontier"] for p in fr["points"]] == on_frontier(
        [(p["x"], p["y"]) for p in fr["points"]])
    assert fr["line"] and all(p["run"] for p in fr["points"])


@pytest.mark.slow
def test_max_concurrency_search_on_the_jax_server(jax_url, tmp_path):
    d, res = run_sweep(scenario_from_dict(tree(tmp_path, jax_url, {
        "param": "load.concurrency", "search": "max_concurrency_under_slo",
        "concurrency_low": 2, "max_probes": 3}, "jax-search")))
    s = res["search"]
    assert 1 <= len(s["probes"]) <= 3 and len(s["bracket"]) == len(s["probes"])
    by_value = {p["value"]: p for p in res["points"]}
    for pr in s["probes"]:
        assert by_value[pr["concurrency"]]["valid"] is pr["valid"]
        assert (d / f"concurrency-{pr['concurrency']}" / "summary.json").is_file()
    lo, hi = s["max_passing_concurrency"], s["min_failing_concurrency"]
    if lo is not None:
        assert by_value[lo]["valid"] is True
        assert s["goodput_at_answer"] == by_value[lo]["goodput"]
    if hi is not None:
        assert by_value[hi]["valid"] is False and (lo is None or hi > lo)
    assert s["converged"] is (lo is not None and hi is not None and hi - lo == 1)
