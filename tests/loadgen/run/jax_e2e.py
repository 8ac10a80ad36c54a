"""`loadgen run` of a small scenario against the real JAX server (tiny preset) that loadgen starts
on 127.0.0.1: the scenario the end-to-end endpoint tests share, and the run itself."""
import json
from pathlib import Path

import yaml

from loadgen.cli import main as cli_main


def jax_scenario(name: str, endpoint: str, workload: dict) -> dict:
    """8 measured requests (1 warm-up) at concurrency 2 on a managed tiny JAX server."""
    return {
        "name": name,
        "target": {"server": {"kind": "jax", "preset": "tiny", "max_model_len": 256, "slots": 2,
                              "startup_timeout_s": 300}},
        "api": {"endpoint": endpoint},
        "workload": {"tokenizer": "bytes", **workload, "seed": 1},
        "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 8, "warmup_requests": 1},
    }


def run_scenario_cli(tmp_path: Path, scenario: dict, stem: str) -> tuple[Path, list[dict]]:
    """``loadgen run`` (exit 0) into tmp_path/run with a text report: (run dir, its records)."""
    sc = {**scenario, "output": {"dir": str(tmp_path), "run_name": "run", "report": "text"}}
    path = tmp_path / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(sc))
    assert cli_main(["run", str(path)]) == 0
    d = tmp_path / "run"
    return d, [json.loads(x) for x in (d / "records.jsonl").read_text().splitlines()]
