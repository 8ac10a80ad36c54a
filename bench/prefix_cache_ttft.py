"""Benchmark (not a test): the JAX server's prefix cache, TTFT of a hit vs a miss on the same prompt
length, through HTTP on the user's path.

    per variant (--prefix-cache on, then off; the same seeded workload):
      `loadgen run`, target.server kind jax (loadgen starts and stops it), completions, stream,
      workload.prefix: G groups of T tokens (uniform popularity) + a fixed P-token tail each, so
      every prompt has the same length; 8 output tokens; concurrency 1; N measured requests
      ─► summary.json prefix_cache (hits / misses by the answer's cached_tokens, TTFT p50 of each,
         the server's hit rate from /metrics over the window) and ttft_ms p50

    python -m bench.prefix_cache_ttft [--preset tiny] [--groups 4] [--prefix-tokens 448]
                                      [--tail-tokens 64] [--requests 32] [--max-model-len 1024]

With the cache on, the first request of each group is a miss (G of them) and the rest hit; with it
off every request is a miss (the baseline at the same length). Prints one line per variant and ends
with ONE JSON line. Evidence: measured (client-side TTFT, the server's counters).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

from loadgen.cli import main as cli_main


def scenario(a: argparse.Namespace, cache: str, out: Path) -> dict:
    return {
        "name": f"prefix-cache-{cache}",
        "target": {"server": {"kind": "jax", "preset": a.preset, "max_model_len": a.max_model_len,
                              "slots": 4, "startup_timeout_s": 1800,
                              "args": {"prefix_cache": cache}}},
        "api": {"endpoint": "completions"},
        "workload": {"tokenizer": "bytes", "seed": 7,
                     "prefix": {"groups": a.groups, "tokens": a.prefix_tokens, "popularity": "uniform"},
                     "prompt_tokens": {"dist": "fixed", "value": a.tail_tokens},
                     "output_tokens": {"dist": "fixed", "value": 8}},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": a.requests},
        "output": {"dir": str(out), "run_name": cache, "report": "none"},
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench.prefix_cache_ttft")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--prefix-tokens", type=int, default=448)
    p.add_argument("--tail-tokens", type=int, default=64)
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--max-model-len", type=int, default=1024)
    a = p.parse_args(argv)
    result = {"preset": a.preset, "groups": a.groups, "prefix_tokens": a.prefix_tokens,
              "tail_tokens": a.tail_tokens, "requests": a.requests, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for cache in ("on", "off"):
            path = Path(tmp) / f"{cache}.yaml"
            path.write_text(yaml.safe_dump(scenario(a, cache, Path(tmp))))
            rc = cli_main(["run", str(path)])
            if rc != 0:
                print(f"loadgen run ({cache}) exited {rc}", file=sys.stderr)
                return rc
            s = json.loads((Path(tmp) / cache / "summary.json").read_text())
            pc = s["prefix_cache"]
            row = {"ttft_ms_p50": s["ttft_ms"]["p50"], **{k: pc[k] for k in (
                "server_hit_rate", "cached_prompt_fraction", "ttft_ms_p50_hit", "ttft_ms_p50_miss",
                "requests_hit", "requests_miss", "prompt_tokens_mean_hit", "prompt_tokens_mean_miss")},
                "reasons": pc["reasons"]}
            result["runs"][cache] = row
            print(f"prefix-cache {cache}: TTFT p50 {row['ttft_ms_p50']:.1f} ms; hits "
                  f"{row['requests_hit']} (p50 {row['ttft_ms_p50_hit']}) misses "
                  f"{row['requests_miss']} (p50 {row['ttft_ms_p50_miss']}); server hit rate "
                  f"{row['server_hit_rate']}", flush=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
