"""A few documented commands run for real, bounded (a handful of requests), against the session's
calibration server (tests/conftest.py ``calib_server``): the README's retry example as written, and
docs/calib.md's `loadgen run scenarios/external.yaml ...` line. Each is the real CLI in a
subprocess; only the URL (the test's server) and the bounds (--set) are added."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.docs.blocks import ROOT, SHELL_LANGS, YAML_LANGS, all_blocks, commands
from tests.docs.check import as_scenario_text, documents

BOUNDED = ["--set", "load.warmup_requests=0", "--set", "output.report=none", "--json"]


def _loadgen(argv: list[str], timeout=120) -> dict:
    r = subprocess.run([sys.executable, "-m", "loadgen", *argv], cwd=ROOT, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])["summary"]


def test_the_readme_retry_example_retries_for_real(calib_server, tmp_path):
    (block,) = [b for b in all_blocks(YAML_LANGS) if b.file == "README.md" and "retry:" in b.text]
    (doc,) = documents(block.text)
    f = tmp_path / "retry.yaml"
    f.write_text(as_scenario_text(doc))
    body = '{calib: {rate_limit_first: 1, retry_after: "0", ttft_ms: 1, itl_ms: 1}}'
    summary = _loadgen(["run", str(f), "--set", f"target.url={calib_server.url}",
                        "--set", "api.model=calib-model", "--set", "api.probe=false",
                        "--set", f"api.extra_body={body}", "--set", "workload.tokenizer=bytes",
                        "--set", "workload.prompt_tokens={dist: fixed, value: 12}",
                        "--set", "workload.output_tokens={dist: fixed, value: 3}",
                        "--set", "workload.seed=4711", "--set", "load.num_requests=2",
                        "--set", f"output.dir={tmp_path}", *BOUNDED])
    assert summary["requests_completed"] == 2 and summary["requests_failed"] == 0
    assert summary["retries"]["requests"] == 2 and summary["retries"]["attempts"] == 4


def test_the_calib_doc_run_line_runs(calib_server, tmp_path):
    (block,) = [b for b in all_blocks(SHELL_LANGS)
                if b.file == "docs/calib.md" and "loadgen run" in b.text]
    (argv,) = [a for a in commands(block) if a[:2] == ["loadgen", "run"]]
    argv = [a.replace("http://127.0.0.1:8123", calib_server.url) for a in argv[1:]]
    assert f"target.url={calib_server.url}" in argv           # the documented port, replaced
    summary = _loadgen([*argv, "--set", "load.num_requests=3", "--set", "load.rate=50",
                        "--set", "workload.seed=4712", "--set", f"output.dir={tmp_path}",
                        *BOUNDED])
    assert summary["requests_completed"] == 3 and summary["requests_failed"] == 0
