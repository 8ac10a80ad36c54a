"""The scenario a timing-truth run hands to ``loadgen run``, and the prompts that carry request ids.

    prompts.jsonl   {"prompt": "rq000000 say something"} ... one per request id (warm-up first),
                    so request id i (loadgen's record id) sends tag(i) (bench.wire.compare)
    scenario.yaml   (JSON, which YAML reads) completions, streaming, target.url, workload jsonl,
        lockstep:   load.mode concurrency, ``streams`` users, all starting together
        staggered:  load.mode server, constant arrivals at streams / request_s, max_concurrency =
                    streams: starts spread over one request's duration (a steady closed loop)
"""
from __future__ import annotations

import json
from pathlib import Path

from bench.wire.compare import tag


def write_prompts(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"prompt": f"{tag(i)} say something"}) + "\n")
    return path


def scenario(name: str, url: str, prompts: Path, streams: int, num_requests: int, warmup: int,
             tokens: int, out_dir: Path, run_name: str, staggered: bool = False,
             request_s: float = 1.32) -> dict:
    load: dict = {"num_requests": num_requests, "warmup_requests": warmup}
    if staggered:
        load.update(mode="server", arrival="constant", rate=round(streams / request_s, 6),
                    max_concurrency=streams)
    else:
        load.update(mode="concurrency", concurrency=streams)
    return {
        "name": name,
        "target": {"url": url},
        "api": {"endpoint": "completions", "stream": True},
        "workload": {"source": "jsonl", "path": str(prompts),
                     "output_tokens": {"dist": "fixed", "value": tokens}},
        "load": load,
        "output": {"dir": str(out_dir), "run_name": run_name, "report": "none"},
    }


def write_scenario(path: Path, sc: dict) -> Path:
    path.write_text(json.dumps(sc, indent=2) + "\n")
    return path
