"""report.md / report.html on synthetic run directories."""
import sys

import pytest

from analysis.report import conditions
from analysis.report import plots
from analysis.report import run_report
from tests.analysis.synth import jax_sut, server_meta, steady, write_run

ITEMS = ("task", "accuracy", "precision", "batch", "device unit", "software versions", "memory",
         "execution split", "time boundary", "cost/power", "evidence")


def test_report_with_plots_and_conditions(tmp_path):
    if not plots.available():
        pytest.skip("matplotlib not installed")
    recs = steady(30, warmup=2)
    recs[10].update(status="error", error_kind="http")
    d = write_run(tmp_path / "run", recs, server_meta(), jax_sut())
    md, page = run_report.write_report(d)
    h, text = page.read_text(), md.read_text()
    assert h.startswith("<!DOCTYPE html>") and "<style>" in h and "<link" not in h
    assert h.count("data:image/png;base64,") == 3  # CDFs, time series, timeline
    assert "Comparison conditions" in h and "Comparison conditions" in text
    for item in ITEMS:
        assert f"<td>{item}</td>" in h and f"| {item} |" in text
    assert "INVALID" in text and "1 measured request(s) failed" in text
    assert "| http | 1 |" in text
    assert "| precision | fp32 |" in text
    assert "| device unit | cpu x1 (backend cpu) |" in text
    # packages that are not installed (vllm: None) are left out
    assert ("server: jax_version 0.10.2, server header aiohttp; client: loadgen 0.1.0, "
            "python 3.11.9, aiohttp 3.14.0 |") in text
    assert "kv_cache_bytes 131072" in text and "server compile (1.5 s)" in text
    assert "TTFT from scheduled p50 / p99 (ms) | 21.00 / 21.00" in text
    # steady-state window (server): first to last measured send, 0.101 .. 1.451 s, 8 tokens per
    # 50 ms gap -> 160 tokens/s; its rule is printed under the headline
    assert "| steady-state output throughput (tokens/s) | 160.00 | measured |" in text
    assert "Steady-state window (ok): open loop (server): from the first measured send" in text
    assert "Steady-state window (ok): open loop (server)" in h
    assert "unmeasured: loadgen measures performance only" in text
    assert "## Server metrics" in text and "<h2>Server metrics</h2>" in h


def test_report_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    d = write_run(tmp_path / "run", steady(12), server_meta(), None)
    _, page = run_report.write_report(d)
    h = page.read_text()
    assert "data:image/png" not in h
    assert "matplotlib is not installed" in h
    assert "<td>precision</td><td>not recorded: the server did not report its dtype</td>" in h
    assert "<td>device unit</td><td>not recorded: the server published no /info</td>" in h
    assert "Not shown: sut.json has no model shape" in h


def test_conditions_missing_sut_say_why():
    s = {"mode": "offline", "energy": {"status": "unmeasured", "reason": "no power source "
                                       "configured"}, "window": {"rule": "r"}, "client": {}}
    rows = {r["item"]: r for r in conditions.conditions_table(s, {}, {}, [])}
    assert list(rows) == list(ITEMS)
    assert rows["device unit"]["value"].startswith("not recorded")
    assert rows["memory"]["evidence"] == "unmeasured"
    assert rows["cost/power"]["value"] == "energy unmeasured: no power source configured"


def vllm_sut(version=None, flags=None, gpus=None) -> dict:
    """sut.json as the runner writes it for a managed vLLM (loadgen/targets/managed.py describe()
    with servers/vllm/describe.py describe_server under "sut"): no /info, uvicorn's header."""
    version = version or {"server": "0.32.0", "package_python": "/usr/bin/python3",
                          "package": {"status": "unavailable", "reason": "no vllm distribution"},
                          "cli": {"status": "unavailable", "reason": "not run"},
                          "version": "0.32.0"}
    flags = flags if flags is not None else {"host": "127.0.0.1", "port": "8000",
                                             "dtype": "bfloat16", "max-num-seqs": "8",
                                             "max-model-len": "2048", "load-format": "dummy"}
    desc = {"kind": "vllm", "flags": flags, "cuda_visible_devices": None,
            "gpus": gpus or {"status": "unavailable", "reason": "nvidia-smi not on PATH; NVML: x"},
            "launcher": ["/venv/bin/vllm"], "model": "/models/small", "version": version}
    return {"target_url": "http://127.0.0.1:8000", "endpoint": "completions",
            "model": "/models/small", "models": {"data": [{"id": "/models/small"}]},
            "response_headers": {"server": "uvicorn"},
            "managed_server": {"kind": "vllm", "argv": ["/venv/bin/vllm", "serve"], "info": None,
                               "sut": desc},
            "server_info": None, "server_version": {"version": "0.32.0"},
            "client_host": {"python": "3.11.9", "packages": {"loadgen": "0.1.0"}}}


def test_conditions_use_what_loadgen_knows_of_a_managed_vllm():
    s = {"mode": "server", "energy": {}, "window": {"rule": "r"}, "client": {}}
    rows = {r["item"]: r for r in conditions.conditions_table(s, {}, vllm_sut(), [])}
    v = rows["software versions"]
    assert v["value"].startswith("server: vllm 0.32.0 (GET /version), server header uvicorn;")
    assert "GET /version" in v["evidence"] and "response header" in v["evidence"]
    assert rows["precision"]["value"] == "bfloat16 (--dtype given at launch)"
    assert rows["precision"]["evidence"] == "recorded (launch flags)"
    assert "server slots 8 (--max-num-seqs)" in rows["batch"]["value"]
    assert "max_model_len 2048 (--max-model-len)" in rows["memory"]["value"]
    assert "nvidia-smi not on PATH" in rows["device unit"]["value"]
    # the version from `vllm --version` (no /version answer), no --dtype, a quantized KV cache
    ver = {"server": {"status": "unavailable", "reason": "HTTP 404"}, "package": {
        "status": "unavailable", "reason": "none"}, "cli": "0.11.0", "version": "0.11.0"}
    sut = vllm_sut(ver, {"kv-cache-dtype": "fp8"}, {"source": "nvidia-smi", "gpus": [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15"}]})
    sut["server_version"] = None
    rows = {r["item"]: r for r in conditions.conditions_table(s, {}, sut, [])}
    assert "server: vllm 0.11.0 (vllm --version)" in rows["software versions"]["value"]
    p = rows["precision"]
    assert p["evidence"] == "unmeasured" and "started without --dtype" in p["value"]
    assert "KV cache fp8 (--kv-cache-dtype)" in p["value"]
    assert rows["device unit"]["value"].startswith("NVIDIA H100 80GB HBM3 x1 on the host")
    assert rows["device unit"]["evidence"] == "recorded (host GPU inventory)"
    # an external server that answers GET /version: its version is shown too
    ext = {"response_headers": {"server": "uvicorn"}, "server_version": {"version": "0.32.0"}}
    rows = {r["item"]: r for r in conditions.conditions_table(s, {}, ext, [])}
    assert rows["software versions"]["value"] == ("server: version 0.32.0 (GET /version), "
                                                  "server header uvicorn")


def test_stage_session_and_reasoning_sections(tmp_path):
    from analysis.report.render import render_md
    from analysis.report.workloads import workload_blocks
    s = {"ttft_ms": {"p50": 30.0, "p99": 40.0},
         "stages": [{"index": 0, "rate": 2.0, "start_s": 0.0, "duration_s": 30.0, "requests": 60,
                     "completed": 60, "failed": 0, "achieved_send_rate": 2.0,
                     "ttft_from_scheduled_ms": {"p50": 21.0, "p99": 25.0},
                     "tpot_ms": {"p50": 10.0, "p99": 12.0}, "itl_ms_p99": 14.0,
                     "output_throughput": 256.0}],
         "sessions": {"sessions": 2, "turns": 5, "turns_per_session_mean": 2.5,
                      "turns_per_session_max": 3,
                      "by_turn": [{"turn": 1, "requests": 2, "prompt_tokens_mean": 10.0,
                                   "ttft_ms": {"p50": 20.0, "p99": 21.0},
                                   "tpot_ms": {"p50": 10.0, "p99": 11.0}}]},
         "reasoning": {"ttft_answer_ms": {"p50": 90.0, "p99": 120.0}, "reasoning_tokens": 40,
                       "answer_tokens": 60, "requests_with_reasoning": 4, "rule": "r"}}
    md = render_md(workload_blocks(s))
    assert "## Stages" in md and "| 0 | 2.00 /s | 0.00–30.00 | 60 | 0 |" in md
    assert "## Sessions by turn" in md and "2 sessions, 5 turns" in md
    assert "time to first answer token p50 / p99 ms | 90.00 / 120.00" in md
    assert workload_blocks({}) == []
