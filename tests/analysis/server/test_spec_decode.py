"""analysis.server.spec_decode on the /metrics text vLLM 0.32 CPU wrote with n-gram speculation
(tests/fixtures/servers/vllm/spec-metrics.json, recorded by bench/compat/record.py, variant
"spec"), parsed by loadgen's own scraper parser; and analysis.metrics.bursts on hand-built
chunks. The expected counts are read from the recorded text with a regex, not written here."""
import json
import re

import pytest

from analysis.metrics.bursts import bursts_block
from analysis.server.spec_decode import server_figures
from loadgen.targets.prometheus_text import parse_samples
from tests.analysis.synth import rec
from tests.support.replay_server import FIXTURES

CASE = FIXTURES / "vllm" / "spec-metrics.json"
pytestmark = pytest.mark.skipif(not CASE.exists(), reason="no recorded vLLM spec-decode metrics")
T0, END = 10_000, 20_000


def text() -> str:
    return "".join(c["text"] for c in json.loads(CASE.read_text())["response"]["chunks"])


def counter(name: str, **labels) -> float:
    """The recorded counter, summed over its label sets (those matching ``labels``)."""
    total = 0.0
    for m in re.finditer(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", text(), re.M):
        if all(f'{k}="{v}"' in m.group(1) for k, v in labels.items()):
            total += float(m.group(2))
    return total


def rows(start_zero: bool = True) -> list[dict]:
    """Two scrapes: the counters at 0 before t0 (a fresh server), the recorded text after the end."""
    out = [{"t_ns": 9_000, "name": "loadgen:scrape", "labels": {"status": "ok"}, "value": 0.01},
           {"t_ns": 21_000, "name": "loadgen:scrape", "labels": {"status": "ok"}, "value": 0.01}]
    for name, labels, value, _gauge in parse_samples(text()):
        if start_zero:
            out.append({"t_ns": 9_000, "name": name, "labels": labels, "value": 0.0})
        out.append({"t_ns": 21_000, "name": name, "labels": labels, "value": value})
    return out


def test_recorded_vllm_counters_give_the_figures():
    drafts = counter("vllm:spec_decode_num_drafts_total")
    dt = counter("vllm:spec_decode_num_draft_tokens_total")
    acc = counter("vllm:spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and dt > 0            # the recording made drafts (a greedy loop, n-gram lookup)
    sd = server_figures(rows(), (T0, END), {"url": "http://vllm/metrics"})
    assert sd["status"] == "measured" and sd["reason"] is None
    assert (sd["drafts"], sd["draft_tokens"], sd["accepted_tokens"]) == (drafts, dt, acc)
    assert sd["acceptance_rate"] == pytest.approx(acc / dt)
    assert sd["mean_acceptance_length"] == pytest.approx(1 + acc / drafts)
    pos = sd["per_position"]
    assert [p["position"] for p in pos] == [0, 1, 2]        # num_speculative_tokens 3
    for p in pos:
        n = counter("vllm:spec_decode_num_accepted_tokens_per_pos_total", position=p["position"])
        assert p["accepted_tokens"] == n and p["acceptance_rate"] == pytest.approx(n / drafts)
    assert sum(p["accepted_tokens"] for p in pos) == acc


def test_no_change_in_the_window_is_no_acceptance_not_zero():
    same = [dict(r, t_ns=9_000) for r in rows(start_zero=False) if r["name"] != "loadgen:scrape"]
    sd = server_figures(rows(start_zero=False) + same, (T0, END))
    assert sd["status"] == "measured" and sd["draft_tokens"] == 0
    assert sd["acceptance_rate"] is None and sd["mean_acceptance_length"] is None
    assert "no draft tokens in the window" in sd["reason"]


def test_a_server_without_spec_counters_or_metrics_says_why():
    plain = [r for r in rows() if "spec_decode" not in r["name"]]
    sd = server_figures(plain, (T0, END))
    assert sd["status"] == "unmeasured" and sd["acceptance_rate"] is None
    assert "no vllm:spec_decode_* counters" in sd["reason"]
    assert "no server metrics" in server_figures([], (T0, END), {"status": "off"})["reason"]


def test_bursts_tokens_per_chunk_and_itl_per_token_vs_chunk():
    # one request: chunks of 1, 3, 1, 4 tokens, 10 ms apart (role chunk 0 tokens first)
    r = rec(0, sched=0, sent=0, chunks=[(1, 0), (5, 1), (15, 3), (25, 1), (35, 4)], end=36)
    b = bursts_block([r])
    assert b["status"] == "measured"
    assert b["tokens_per_chunk"]["mean"] == pytest.approx(9 / 4) and b["tokens_per_chunk"]["max"] == 4
    assert b["histogram"] == {"1": 2, "3": 1, "4": 1}
    assert b["multi_token_chunk_share"] == pytest.approx(0.5)
    assert b["tokens_in_bursts_share"] == pytest.approx(7 / 9)
    # per chunk: the gaps 10, 10, 10; per token: 10/3 ×3, 10/1, 10/4 ×4 (token-weighted)
    assert b["itl_ms_per_chunk"]["p50"] == pytest.approx(10.0) and b["itl_ms_per_chunk"]["count"] == 3
    assert b["itl_ms_per_token"]["count"] == 8
    assert b["itl_ms_per_token"]["mean"] == pytest.approx(30 / 8)   # each gap spread over its tokens
    none = bursts_block([rec(1, sched=0, sent=0, status="error", error_kind="http")])
    assert none["status"] == "unmeasured" and none["tokens_per_chunk"] is None
