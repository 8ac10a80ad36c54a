"""`loadgen run scenarios/tools.yaml` as a user runs it, against the real calibration server on
127.0.0.1: records with the tool-call checks, summary.json "structured", the report's section;
bad input exits 2 in one line; the Locust engine sends the same tools through the shared body and
stream step."""
from __future__ import annotations

import importlib.util
import json
from functools import partial
from pathlib import Path

import pytest

from analysis.contract import validate_run_dir
from loadgen.record import read_records
from servers.calib import CalibrationServer
from tests.support.procs import loadgen_cli

ROOT = Path(__file__).resolve().parents[3]
ARGS = '{"city": "Paris", "unit": "celsius"}'


@pytest.fixture(scope="module")
def server():
    with CalibrationServer(ttft_ms=5, itl_ms=1) as s:
        yield s


cli = partial(loadgen_cli, timeout_s=240)


def sets(server, tmp_path: Path, calib: dict, name: str, n: int = 12) -> list[str]:
    out = []
    for kv in (f"target.url={server.url}", "api.model=calib-model", f"load.num_requests={n}",
               "load.warmup_requests=0", "load.concurrency=4", "api.ready_timeout_s=0",
               f"output.dir={tmp_path}", f"output.run_name={name}", "output.report=text",
               "api.extra_body=" + json.dumps({"calib": calib})):
        out += ["--set", kv]
    return out


@pytest.mark.parametrize("transport", ["wire", "aiohttp"])
def test_run_records_summary_and_report(server, tmp_path, monkeypatch, transport):
    monkeypatch.setenv("LOADGEN_HTTP", transport)
    r = cli("run", ROOT / "scenarios/tools.yaml",
            *sets(server, tmp_path, {"answer": "tool_call", "json": ARGS}, "ok"))
    assert r.returncode == 0, r.stderr[-2000:]
    run = tmp_path / "ok"
    recs = read_records(run / "records.jsonl")
    assert len(recs) == 12 and all(x["status"] == "ok" for x in recs)
    for x in recs:
        assert (x["tool_calls"], x["tool_args_parsed"], x["tool_args_valid"]) == (1, True, True)
        assert x["finish_reason"] == "tool_calls" and x["first_token_at_ns"] is not None
        assert x["output_tokens"] == x["chunk_output_tokens"] > 1
    s = json.loads((run / "summary.json").read_text())["structured"]
    assert s["response_format"] is None
    assert (s["tools"]["requests"], s["tools"]["parsed_share"], s["tools"]["valid_share"]) == (12, 1.0, 1.0)
    assert s["tools"]["ttft_ms"]["p50"] >= 5
    assert "## Tool calls and structured output" in (run / "report.md").read_text()
    assert validate_run_dir(run) == []


def test_invalid_arguments_and_json_answers_show_in_the_summary(server, tmp_path):
    rf = json.dumps({"type": "json_schema", "json_schema": {
        "name": "f", "schema": {"type": "object", "required": ["city", "summary"]}}})
    r = cli("run", ROOT / "scenarios/tools.yaml",
            *sets(server, tmp_path, {"answer": "json", "json": '{"city": "Oslo"}'}, "bad", n=8),
            "--set", f"api.response_format={rf}", "--set", "workload.tool_choice=auto")
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((tmp_path / "bad" / "summary.json").read_text())["structured"]
    assert s["tools"]["called"] == 0 and s["tools"]["called_share"] == 0
    g = s["response_format"]
    assert (g["requests"], g["parsed_share"], g["valid_share"]) == (8, 1.0, 0.0)
    assert "'summary' is a required property" in g["invalid_examples"][0]


def test_tools_on_completions_exit_2_in_one_line(tmp_path):
    r = cli("run", ROOT / "scenarios/tools.yaml", "--set", "api.endpoint=completions")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "workload.tools: needs api.endpoint: chat" in line


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
@pytest.mark.skipif(importlib.util.find_spec("locust") is None, reason="the locust extra")
def test_locust_engine_sends_the_tools_and_counts_the_tool_call_stream(server, tmp_path):
    r = cli("run", ROOT / "scenarios/tools.yaml", "--engine", "locust",
            *sets(server, tmp_path, {"answer": "tool_call", "json": ARGS}, "lc", n=6), timeout_s=400)
    assert r.returncode == 0, r.stderr[-2000:]
    recs = read_records(tmp_path / "lc" / "records.jsonl")
    assert len(recs) == 6 and all(x["status"] == "ok" for x in recs)
    for x in recs:        # the shared stream step and the same schema check as the native client
        assert x["tool_calls"] == 1 and x["tool_args_parsed"] is True
        assert x["tool_args_valid"] is True
        assert x["output_tokens"] == x["chunk_output_tokens"] > 1
    bodies = [e["body"] for e in server.log() if e["body"].get("tools")]
    assert bodies and bodies[-1]["tool_choice"] == "required"
