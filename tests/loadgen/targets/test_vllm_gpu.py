"""A real vLLM, managed by loadgen (GPU hosts only: ``pytest -m gpu tests/loadgen/targets/test_vllm_gpu.py``).

Needs LOADGEN_VLLM_MODEL = a local model directory (config + tokenizer; the weights are not read:
load_format dummy) and vLLM: LOADGEN_VLLM_EXECUTABLE = its venv (or `vllm`, or a python; the
scenario's target.server.executable), else vllm importable here. Checks what the CPU tests can only check against vLLM's
protocol definitions: ignore_eos gives exactly max_tokens, continuous usage stats agree with the
chunk count, /metrics carries the names analysis.server.metrics reads, and the TTFT parts add up.
"""
import json
import os

import pytest

from analysis.server.metrics import server_metrics_summary
from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict

MODEL = os.environ.get("LOADGEN_VLLM_MODEL")
EXECUTABLE = os.environ.get("LOADGEN_VLLM_EXECUTABLE")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not MODEL, reason="LOADGEN_VLLM_MODEL is not set")]


def test_managed_vllm_end_to_end(tmp_path):
    if not EXECUTABLE:
        pytest.importorskip("vllm")
    sc = scenario_from_dict({
        "name": "vllm-gpu",
        "target": {"server": {"kind": "vllm", "model": MODEL, "load_format": "dummy",
                              "max_model_len": 2048, "slots": 16,
                              "gpu_memory_utilization": 0.5, "startup_timeout_s": 600,
                              "args": {"enable_prefix_caching": True},
                              **({"executable": EXECUTABLE} if EXECUTABLE else {})},
                   "metrics_interval_s": 0.5},
        "api": {"continuous_usage": True, "ignore_eos": True},
        "workload": {"prompt_tokens": {"dist": "fixed", "value": 256},
                     "output_tokens": {"dist": "fixed", "value": 64},
                     "shared_prefix_tokens": 128},
        "load": {"mode": "concurrency", "concurrency": 8, "num_requests": 32,
                 "warmup_requests": 4},
        "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}})
    d = run_scenario(sc).run_dir
    recs = [r for r in read_records(d / "records.jsonl") if r["phase"] == "measured"]
    assert len(recs) == 32 and all(r["status"] == "ok" for r in recs)
    assert all(r["output_tokens"] == 64 and r["token_count_mismatch"] is False for r in recs)
    sut = json.loads((d / "sut.json").read_text())
    desc = sut["managed_server"]["sut"]
    assert isinstance(desc["version"]["server"], str) and desc["gpus"]["gpus"]
    lc = json.loads((d / "server.json").read_text())
    assert lc["status"] == "stopped" and lc["stop"]["signal"] in ("SIGINT", "SIGTERM")
    sm = server_metrics_summary(d)
    f = sm["figures"]
    for k in ("server_ttft", "server_queue", "server_prefill", "server_decode", "kv_usage_max",
              "prefix_cache_hit_rate"):
        assert f[k]["evidence"] == "measured", (k, f[k])
    assert f["server_ttft"]["count"] == 32
    dec = sm["ttft_decomposition"]
    assert dec["network_client_ms"] > 0 and dec["server_other_ms"] is not None
