"""The Locust users' client speaks plain http:// only (loadgen.client.http1.message.Target): an
https:// target is refused before the run, one line naming the field, exit 2 (not a run of
``client`` errors)."""
from __future__ import annotations

from pathlib import Path

import pytest

import yaml

from tests.support.procs import loadgen_cli


def _scenario(tmp_path: Path, target: dict) -> Path:
    tree = {"name": "tls", "target": target, "api": {"model": "m"},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 4},
                         "output_tokens": {"dist": "fixed", "value": 4}},
            "load": {"mode": "server", "rate": 1, "num_requests": 1},
            "output": {"dir": str(tmp_path / "runs"), "run_name": "tls", "report": "none"}}
    p = tmp_path / "tls.yaml"
    p.write_text(yaml.safe_dump(tree))
    return p


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_locust_against_an_https_target_is_refused_before_the_run(tmp_path):
    p = _scenario(tmp_path, {"url": "https://127.0.0.1:1"})
    out = loadgen_cli("run", p, "--engine", "locust", timeout_s=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("loadgen: error: target.url: https://127.0.0.1:1"), lines
    assert not (tmp_path / "runs" / "tls").exists()            # refused before the run
    p = _scenario(tmp_path, {"urls": ["http://127.0.0.1:1", "https://127.0.0.1:2"]})
    out = loadgen_cli("run", p, "--engine", "locust", timeout_s=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and "target.urls: https://127.0.0.1:2" in lines[0]
