"""api.endpoint transcriptions end to end: `loadgen run` (the CLI, as a user runs it) against the
calibration server's /v1/audio/transcriptions on 127.0.0.1, which parses every upload (bounded
multipart parser) and reads each WAV's length (GET /calib/log ``audio``). Both transports, two
sender processes, and the three stream shapes the server can send (OpenAI, vLLM, transformers)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from analysis.contract import validate_run_dir
from loadgen.record import read_records

ROOT = Path(__file__).resolve().parents[3]
N, WARM = 6, 1


def scenario(tmp_path: Path, url: str, name: str, calib: dict, stream: bool = True) -> Path:
    tree = {"name": name, "target": {"url": url},
            "api": {"endpoint": "transcriptions", "stream": stream,
                    "extra_body": {"calib": {"ttft_ms": 5, "itl_ms": 2, "tokens": 5, **calib}}},
            "workload": {"seed": 3, "audio": {"seconds": 0.5, "sample_rate": 8000, "pool": 3}},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": N,
                     "warmup_requests": WARM},
            "output": {"dir": str(tmp_path), "run_name": name, "report": "text"}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(tree))
    return p


def run_cli(p: Path, *extra: str, env: dict = None) -> dict:
    r = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p), "--json", *extra],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("fmt,transport,procs", [
    ("openai", "wire", None), ("openai", "aiohttp", None), ("vllm", "wire", "2"),
    ("text", "aiohttp", "2"), ("text", "wire", None)])
def test_transcriptions_run_end_to_end(calib_server, tmp_path, fmt, transport, procs):
    p = scenario(tmp_path, calib_server.url, f"a-{fmt}-{transport}", {"format": fmt})
    t0 = calib_server.log()[-1]["seq"] if calib_server.log() else 0
    out = run_cli(p, *(["--procs", procs] if procs else []), env={"LOADGEN_HTTP": transport})
    run_dir = Path(out["run_dir"])
    recs = read_records(run_dir / "records.jsonl")
    assert sorted(r["id"] for r in recs) == list(range(N + WARM))
    assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    assert all(r["input_audio_s"] == 0.5 and r["output_tokens"] == 5 for r in recs)
    assert all(r["first_token_at_ns"] and r["requested_output_tokens"] is None for r in recs)
    if fmt == "text":                                 # no usage, no finish_reason: chunks
        assert {r["output_tokens_source"] for r in recs} == {"chunks"}
    else:
        assert {r["output_tokens_source"] for r in recs} == {"usage"}
        assert {r["prompt_tokens"] for r in recs} == {25}    # 50 per audio second
    seen = [e for e in calib_server.log() if e["seq"] > t0 and e["path"].endswith("/transcriptions")]
    assert len(seen) == N + WARM + 1                  # + the probe's own 1 s clip
    assert {e["audio"]["seconds"] for e in seen} == {0.5, 1.0}
    assert {e["audio"]["sample_rate"] for e in seen if e["audio"]["seconds"] == 0.5} == {8000}
    assert all(e["fields"]["response_format"] == "json" and e["fields"]["stream"] == "true"
               for e in seen)
    a = out["summary"]["audio"]
    assert a["requests"] == N and a["audio_s_total"] == N * 0.5 and a["rtfx"] > 0
    assert a["rtfx_per_request"]["count"] == N and a["rtfx_reason"] is None
    assert out["summary"]["ttft_ms"]["count"] == N
    if procs:                                          # both sender processes sent clips
        assert {r["worker"] for r in recs} == {"0", "1"}
        meta = json.loads((run_dir / "meta.json").read_text())
        assert [q["status"] for q in meta["client_processes"]] == ["done", "done"]
    assert validate_run_dir(run_dir) == []


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_whole_answers_and_server_errors_are_records(calib_server, tmp_path):
    p = scenario(tmp_path, calib_server.url, "a-whole", {}, stream=False)
    out = run_cli(p)
    recs = read_records(Path(out["run_dir"]) / "records.jsonl")
    assert all(r["status"] == "ok" and r["output_tokens"] == 5 and r["output_chars"] == 20
               for r in recs)
    p = scenario(tmp_path, calib_server.url, "a-500", {"fault": "http500"})
    r = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p), "--json"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    out = json.loads(r.stdout)
    assert out["summary"]["requests_failed"] == N and out["summary"]["audio"]["rtfx"] is None
    assert out["summary"]["audio"]["rtfx_reason"] == "no completed request with audio"
