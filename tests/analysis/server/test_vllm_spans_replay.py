"""vLLM's real OTLP export, recorded (tests/fixtures/servers/vllm-spans/), replayed through a fresh
receiver and joined again: every record gets exactly the server_timing the live run gave it, and
the counts (request spans, vLLM's other spans, the probe's unmatched one) are the live run's."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.server.spans_join import join_file
from analysis.server.spans_replay import replay

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "servers" / "vllm-spans"


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_the_recorded_vllm_export_joins_again_to_the_live_values(tmp_path):
    live = records(FIX / "records.jsonl")
    bare = tmp_path / "records.jsonl"
    bare.write_text("".join(json.dumps({**r, "server_timing": None}) + "\n" for r in live))
    snap = replay(FIX / "server_spans.raw.jsonl")
    counts = json.loads((FIX / "server_spans.json").read_text())
    assert snap["skipped_lines"] == [] and snap["bad_spans"] == {} and snap["refused_bodies"] == {}
    assert snap["foreign_spans"] == counts["foreign_spans"] == 12
    stats = join_file(bare, snap["timings"], "otlp")
    assert stats["joined"] == counts["joined"] == len(live) == 17
    assert stats["unmatched_spans"] == counts["unmatched_spans"] == 1      # the preflight probe
    again = {r["id"]: r["server_timing"] for r in records(bare)}
    for r in live:
        got, want = again[r["id"]], r["server_timing"]
        assert got.keys() == want.keys() and got["source"] == "otlp"
        for k, v in want.items():
            assert got[k] == (pytest.approx(v, abs=1e-9) if isinstance(v, float) else v), k


def test_vllm_says_every_phase_but_the_scheduler_and_they_add_up():
    for r in records(FIX / "records.jsonl"):
        t = r["server_timing"]
        assert all(t[k] is not None for k in ("queue_ms", "prefill_ms", "decode_ms",
                                              "server_ttft_ms", "server_e2e_ms"))
        assert t["queue_ms"] + t["prefill_ms"] <= t["server_ttft_ms"] + 1e-6
        assert t["server_ttft_ms"] <= (r["first_token_at_ns"] - r["sent_at_ns"]) / 1e6
    st = json.loads((FIX / "summary_server_timing.json").read_text())
    assert st["status"] == "ok" and st["joined"] == st["records_traced"] == 16
