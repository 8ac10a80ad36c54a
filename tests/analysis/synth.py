"""Hand-built records and run directories whose figures can be worked out on paper."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

MS = 1_000_000  # ns per ms


def rec(i: int = 0, *, phase: str = "measured", sched: Optional[int] = 0, sent: Optional[int] = 0,
        chunks: Optional[list] = None, end: Optional[int] = None, status: str = "ok",
        out: Optional[int] = None, prompt: Optional[int] = 10, first_token: Optional[int] = None,
        error_kind: Optional[str] = None, **extra) -> dict:
    """A record; times in ms relative to 0 (converted to ns). ``chunks`` = [[ms, n_tokens]].
    ``out`` defaults to the tokens in the chunks; ``end`` to the last chunk's time."""
    ch = [[int(t * MS), n] for t, n in (chunks or [])]
    ns = lambda x: None if x is None else int(x * MS)  # noqa: E731
    ft = ns(first_token) if first_token is not None else next((t for t, n in ch if n > 0), None)
    r = {"id": i, "phase": phase, "scheduled_at_ns": ns(sched), "sent_at_ns": ns(sent),
         "first_chunk_at_ns": ch[0][0] if ch else None, "first_token_at_ns": ft,
         "end_at_ns": ns(end) if end is not None else (ch[-1][0] if ch else None),
         "chunks": ch, "status": status, "http_status": 200 if status == "ok" else None,
         "error_kind": error_kind, "error": None, "prompt_tokens": prompt,
         "prompt_tokens_source": "usage" if prompt is not None else None,
         "output_tokens": out if out is not None else (sum(n for _, n in ch) if ch else None),
         "output_tokens_source": "usage", "usage_output_tokens": None, "chunk_output_tokens": None,
         "token_count_mismatch": None, "requested_output_tokens": None,
         "workload_prompt_tokens": None, "finish_reason": "length", "output_chars": None,
         "worker": None}
    r.update(extra)
    return r


def steady(n: int, *, gap_ms: float = 50, lag_ms: float = 1, tokens: int = 8,
           ttft_ms: float = 20, itl_ms: float = 10, warmup: int = 0, start_ms: float = 0) -> list:
    """n requests scheduled every gap_ms, each sent lag_ms late, a role-only chunk at +5 ms, first
    token at +ttft_ms, then one token every itl_ms, a usage-only chunk itl_ms after the last."""
    out = []
    for i in range(n):
        s = start_ms + i * gap_ms
        t = s + lag_ms
        ch = [[t + 5, 0]] + [[t + ttft_ms + k * itl_ms, 1] for k in range(tokens)]
        ch.append([ch[-1][0] + itl_ms, 0])
        out.append(rec(i, phase="warmup" if i < warmup else "measured", sched=s, sent=t, chunks=ch))
    return out


TINY_SHAPE = {"name": "tiny", "n_layers": 2, "dim": 64, "n_heads": 4, "n_kv_heads": 2,
              "head_dim": 16, "ffn_dim": 128, "vocab_size": 256, "tied_embeddings": True,
              "n_params": 100_000, "dtype": "fp32", "dtype_bytes": 4, "max_model_len": 512,
              "slots": 4}


def server_meta(**over) -> dict:
    meta = {"mode": "server", "t0_ns": 0, "rate": 20.0, "scheduled_rate": 20.0,
            "slo": {"preset": "server/llama3_1-8b", "percentile": 99.0, "max_schedule_lag_ms": 10.0,
                    "min_rate_fraction": 0.95},
            "min_duration_s": 1.0, "min_queries": 10, "client_cpu": 0.3, "interrupted": False,
            "power_sources": ["none"]}
    meta.update(over)
    return meta


def write_run(d: Path, records: list, meta: dict, sut: Optional[dict] = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (d / "meta.json").write_text(json.dumps(meta))
    if sut is not None:
        (d / "sut.json").write_text(json.dumps(sut))
    return d


def jax_sut() -> dict:
    """sut.json as loadgen/targets/sut.py writes it for a managed JAX server (server_info = GET /info)."""
    info = {"preset": "tiny", "n_params": 100_000, "dtype": "fp32", "slots": 4,
            "max_model_len": 512, "kv_cache_bytes": 131072, "weight_bytes": 400_000,
            "jax_version": "0.10.2", "backend": "cpu", "device_kind": "cpu", "device_count": 1,
            "compile_s": 1.5, "model": dict(TINY_SHAPE)}
    return {"target_url": "http://127.0.0.1:8123", "endpoint": "completions", "model": "tiny",
            "models": {"data": [{"id": "tiny"}]}, "response_headers": {"server": "aiohttp"},
            "managed_server": {"kind": "jax", "info": info}, "server_info": info,
            "client_host": {"python": "3.11.9", "cpu_affinity": 2, "memory_bytes": 8 * 2**30,
                            "packages": {"loadgen": "0.1.0", "aiohttp": "3.14.0", "vllm": None}}}


def closed_loop(conc: int, per_lane: int, *, ttft_ms: float = 20, itl_ms: float = 10,
                tokens: int = 8, prompt: int = 10) -> list:
    """``conc`` lanes, each sending ``per_lane`` requests back to back (closed loop): request k of
    a lane is sent when request k-1 ends; first token at +ttft_ms, then one every itl_ms."""
    out, i = [], 0
    for lane in range(conc):
        t = lane * 0.5  # lanes start 0.5 ms apart
        for _ in range(per_lane):
            ch = [[t + ttft_ms + k * itl_ms, 1] for k in range(tokens)]
            out.append(rec(i, sched=t, sent=t, chunks=ch, prompt=prompt))
            t = ch[-1][0]
            i += 1
    return out


def power_rows(start_ms: float, end_ms: float, watts: float, *, hz: float = 100,
               source: str = "nvml", device: str = "gpu0") -> list:
    """Constant-power samples from start to end (inclusive) plus measure marks."""
    n = int(np.ceil((end_ms - start_ms) / 1000 * hz))
    rows = [{"t_ns": int(start_ms * MS), "source": "session", "kind": "mark",
             "value": "measure_start"}]
    rows += [{"t_ns": int((start_ms + k * 1000 / hz) * MS), "source": source, "device": device,
              "scope": "gpu", "kind": "power_w", "value": watts} for k in range(n + 1)]
    rows.append({"t_ns": int(end_ms * MS), "source": "session", "kind": "mark",
                 "value": "measure_end"})
    return rows


SCENARIO_YAML = """name: synth
target: {url: "http://127.0.0.1:8123"}
api: {endpoint: completions, stream: true, ignore_eos: true, include_usage: true}
workload: {source: synthetic, prompt_tokens: {dist: fixed, value: 10},
           output_tokens: {dist: fixed, value: 8}, tokenizer: bytes, seed: 0}
load: {mode: concurrency, concurrency: @CONC@, num_requests: @N@}
slo: {ttft_ms: 100.0, tpot_ms: 30.0, percentile: 99.0}
output: {dir: runs, run_name: @RUN@}
"""


def scenario_yaml(conc: int, n: int, run_name: str) -> str:
    return (SCENARIO_YAML.replace("@CONC@", str(conc)).replace("@N@", str(n))
            .replace("@RUN@", run_name))


def write_sweep(root: Path, values=(1, 2, 4), per_lane: int = 6, spec_path=None,
                watts=lambda c: 100 + 20 * c) -> Path:
    """A concurrency sweep laid out as loadgen/multirun/sweep.py writes it: root/concurrency-C/ run
    directories (records, meta, sut, scenario.yaml, power.jsonl, summary.json) + sweep.json.
    TPOT grows with the batch: itl = 10 + 2 * C ms; ``watts(C)`` W of GPU power (None: no
    power source)."""
    from analysis.metrics.summary import write_summary
    root.mkdir(parents=True, exist_ok=True)
    points = []
    for c in values:
        name = f"concurrency-{c:g}"
        recs = closed_loop(c, per_lane, itl_ms=10 + 2 * c)
        end = max(r["end_at_ns"] for r in recs) / MS
        meta = server_meta(mode="concurrency", rate=None, scheduled_rate=None, in_flight_cap=c,
                           slo={"ttft_ms": 100.0, "tpot_ms": 30.0, "percentile": 99.0},
                           min_queries=0, min_duration_s=0,
                           power_sources=[{"name": "nvml", "status": "ok",
                                           "evidence": "measured"}] if watts else ["none"],
                           workload={"source": "synthetic", "path": None, "tokenizer": "bytes",
                                     "token_count": "exact", "seed": 0,
                                     "shared_prefix_tokens": 0, "file_prompts": None},
                           loadgen_version="0.1.0", model="tiny")
        if spec_path is not None:
            meta["device_spec"] = str(spec_path)
        d = write_run(root / name, recs, meta, jax_sut())
        if watts:
            (d / "power.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                   for r in power_rows(0, end, watts(c))))
        (d / "scenario.yaml").write_text(scenario_yaml(c, c * per_lane, name))
        write_summary(d)
        points.append({"value": c, "run_dir": name, "reused": False})
    (root / "sweep.json").write_text(json.dumps({
        "fingerprint": "synth", "scenario": "synth", "param": "load.concurrency",
        "mode": "concurrency", "points": points, "search": None,
        "rule": "a point passes when its verdict is VALID"}))
    return root


def spec_file(path: Path, bandwidth: float = 1e10, peak: float = 1e12) -> Path:
    """A device spec JSON (analysis.roofline.devices.load_spec format) with fp32 peak and bandwidth."""
    path.write_text(json.dumps({
        "name": "test-device", "scope": "1 chip",
        "peak": {"fp32": {"value": peak, "unit": "FLOP/s", "evidence": "documented",
                          "source": "test"}},
        "mem_bandwidth": {"value": bandwidth, "unit": "B/s", "evidence": "documented",
                          "source": "test"}}))
    return path


def noisy_loop(seed: int, scale: float = 1.0, lanes: int = 4, per_lane: int = 60,
               tokens: int = 16) -> list:
    """Like ``closed_loop`` with random latencies: TTFT 50 ms × lognormal(σ 0.3), each ITL
    10 ms × lognormal(σ 0.2), all × ``scale``; ``seed`` draws them (same seed, same run)."""
    rng = np.random.default_rng(seed)
    out, i = [], 0
    for lane in range(lanes):
        t = lane * 0.5
        for _ in range(per_lane):
            gaps = np.concatenate([[50 * scale * rng.lognormal(0, 0.3)],
                                   10 * scale * rng.lognormal(0, 0.2, tokens - 1)])
            ch = [[float(x), 1] for x in t + np.cumsum(gaps)]
            out.append(rec(i, sched=t, sent=t, chunks=ch))
            t, i = ch[-1][0], i + 1
    return out
