"""`loadgen run` against the replayed vLLM 0.32 CPU start with n-gram speculative decoding
(``--speculative-config '{"method": "ngram", "num_speculative_tokens": 3, ...}'``, recorded by
bench/compat/record.py, variant "spec"): with ``api.continuous_usage`` each chunk's tokens are
vLLM's own count, so summary.json ``spec_decode.client`` shows the bursts vLLM streamed (several
accepted tokens in one chunk), read here from the transcript; the scraper reads the recorded
``vllm:spec_decode_*`` counters (constant in a replay: no draft in the window, said so)."""
from __future__ import annotations

import collections
import json

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from tests.support.replay_server import FIXTURES, ReplayServer

CASE = FIXTURES / "vllm" / "spec-completions-stream-continuous-usage.json"
pytestmark = pytest.mark.skipif(not CASE.exists(), reason="no recorded vLLM spec-decode stream")
N = 4


def recorded_chunk_tokens() -> list[int]:
    """Tokens per content chunk of the recording: the rise of its cumulative completion_tokens."""
    text = "".join(p["text"] for p in json.loads(CASE.read_text())["response"]["chunks"])
    out, cum = [], 0
    for ln in text.splitlines():
        if ln.startswith("data: {"):
            e = json.loads(ln[6:])
            if e.get("choices") and (e.get("usage") or {}).get("completion_tokens") is not None:
                out.append(e["usage"]["completion_tokens"] - cum)
                cum = e["usage"]["completion_tokens"]
    return out


def test_bursts_of_a_speculating_vllm(tmp_path):
    sizes = recorded_chunk_tokens()
    assert max(sizes) > 1                     # the recording has multi-token chunks (accepted drafts)
    with ReplayServer("vllm", variant="spec") as s:
        res = run_scenario(scenario_from_dict({
            "name": "spec", "target": {"url": s.url, "metrics_interval_s": 0.2},
            "api": {"continuous_usage": True},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": sum(sizes)}},
            "load": {"mode": "concurrency", "concurrency": 1, "num_requests": N},
            "output": {"dir": str(tmp_path), "run_name": "spec", "report": "text"}}))
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    assert len(recs) == N and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    for r in recs:
        assert [n for _, n in r["chunks"] if n] == [n for n in sizes if n]
    c = res.summary["spec_decode"]["client"]
    want = collections.Counter(n for n in sizes if n)
    assert c["histogram"] == {str(k): v * N for k, v in sorted(want.items())}
    assert c["tokens_per_chunk"]["max"] == max(sizes)
    assert c["multi_token_chunk_share"] == pytest.approx(sum(v for k, v in want.items() if k > 1)
                                                          / sum(want.values()))
    assert c["itl_ms_per_token"]["count"] > c["itl_ms_per_chunk"]["count"]
    sd = res.summary["spec_decode"]
    assert sd["status"] == "measured" and sd["draft_tokens"] == 0 and sd["acceptance_rate"] is None
    assert "no draft tokens in the window" in sd["reason"]
    names = {json.loads(ln)["name"] for ln in (res.run_dir / "server_metrics.jsonl").read_text().splitlines()}
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_total" in names
    assert "Speculative decoding and bursts" in (res.run_dir / "report.md").read_text()
