"""api.endpoint embeddings and responses on the Locust engine, end to end against the real JAX
server (tiny preset) on 127.0.0.1: the same run through the native engine and through Locust
gives records of the same fields and values (embeddings: ``inputs``, the count check, no token
timings; responses: named events, the first token at the first response.output_text.delta).
Locust (gevent) runs in subprocesses only, never in pytest."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

if importlib.util.find_spec("locust") is None:
    pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')",
                allow_module_level=True)

from analysis.contract import validate_run_dir
from loadgen.engine.locust.run import LocustOptions, run_locust
from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import load_scenario

SAME = ("phase", "status", "http_status", "inputs", "requested_output_tokens",
        "workload_prompt_tokens", "prompt_tokens", "prompt_tokens_source", "output_tokens",
        "output_tokens_source", "chunk_output_tokens", "finish_reason", "error_kind")


def _both(tmp_path: Path, tree: dict, workers=None):
    """The scenario run natively, then on Locust: (native records, Locust result, records)."""
    out = []
    for name in ("native", "locust"):
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump({**tree, "name": name, "output": {
            "dir": str(tmp_path / "runs"), "run_name": name, "report": "text"}}))
        sc = load_scenario(p)
        res = (run_scenario(sc) if name == "native" else
               run_locust(sc, LocustOptions(workers=workers, scenario_path=str(p))))
        assert not res.meta.get("crashed"), res.meta.get("crashed")
        out.append((res, {r["id"]: r for r in read_records(res.run_dir / "records.jsonl")}))
    (_, nat), (res, loc) = out
    assert nat.keys() == loc.keys()
    for i, r in loc.items():
        assert set(r) == set(nat[i])
        assert {k: r.get(k) for k in SAME} == {k: nat[i].get(k) for k in SAME}, i
    return nat, res, loc


def test_embeddings_on_locust_match_the_native_records(jax_url, tmp_path):
    tree = {"target": {"url": jax_url}, "api": {"endpoint": "embeddings"},
            "workload": {"tokenizer": "bytes",
                         "prompt_tokens": {"dist": "uniform", "min": 8, "max": 48},
                         "inputs_per_request": 3, "seed": 1},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 6,
                     "warmup_requests": 1}}
    _, res, loc = _both(tmp_path, tree, workers=2)
    assert len(loc) == 7
    for r in loc.values():
        assert r["status"] == "ok" and r["inputs"] == 3 and r["requested_output_tokens"] is None
        assert r["chunks"] == [] and r["first_token_at_ns"] is None
        assert r["prompt_tokens_source"] == "usage" and r["end_at_ns"] > r["sent_at_ns"]
    s = json.loads((res.run_dir / "summary.json").read_text())
    e = s["embeddings"]
    assert e["latency_ms"]["count"] == 6 and e["inputs_per_request"] == 3.0
    assert s["ttft_ms"]["p50"] is None
    assert validate_run_dir(res.run_dir) == []


def test_responses_on_locust_match_the_native_records(jax_url, tmp_path):
    tree = {"target": {"url": jax_url}, "api": {"endpoint": "responses"},
            "workload": {"tokenizer": "bytes",
                         "prompt_tokens": {"dist": "uniform", "min": 8, "max": 32},
                         "output_tokens": {"dist": "uniform", "min": 4, "max": 12}, "seed": 1},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 6,
                     "warmup_requests": 1}}
    _, res, loc = _both(tmp_path, tree)
    for r in loc.values():
        assert r["status"] == "ok" and r["finish_reason"] == "length"
        assert r["output_tokens"] == r["requested_output_tokens"]
        tokens = [t for t, n in r["chunks"] if n]
        # response.created comes first and carries no token; the first delta is the first token.
        # Causal, not timed: a later chunk than the first, stamped no earlier. Equal stamps are
        # right when one read carried both events (a busy box reads late: one read, one kernel
        # stamp for every event in it; the native records do the same).
        first_tok = next(i for i, (_, n) in enumerate(r["chunks"]) if n)
        assert first_tok >= 1 and r["chunks"][0][1] == 0
        assert r["first_token_at_ns"] == tokens[0] >= r["first_chunk_at_ns"] == r["chunks"][0][0]
    s = json.loads((res.run_dir / "summary.json").read_text())
    assert s["requests_completed"] == 6 and s["ttft_ms"]["count"] == 6
    assert validate_run_dir(res.run_dir) == []
