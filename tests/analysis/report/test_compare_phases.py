"""compare's "where the TTFT moved" (analysis/report/compare_phases.py): the part of the TTFT
split that changed most between two runs — by hand on typed splits, then end to end on two
real runs against the calibration server whose spans say the queue grew by 10 ms."""
from __future__ import annotations

import socket

import pytest

from analysis.contract.summary_server import TtftParts
from analysis.report.compare import blocks, compare
from analysis.report.compare_phases import moved, phase_blocks, phase_changes
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from servers.calib import CalibrationServer


def parts(q, p, o, r):
    return TtftParts(queue_ms=q, prefill_ms=p, server_other_ms=o, rest_ms=r,
                     client_ttft_ms=q + p + o + r)


def test_the_part_that_moved_most_and_its_share_of_the_ttft_change():
    m = moved(parts(1, 2, 0.5, 0.3), parts(1, 9, 0.5, 1.3))
    assert m["part"] == "prefill_ms" and m["label"] == "prefill"
    assert m["delta_ms"]["prefill_ms"] == pytest.approx(7)
    assert m["delta_ms"]["client_ttft_ms"] == pytest.approx(8)
    assert m["share"] == pytest.approx(7 / 8)
    assert moved(parts(1, 2, 0, 0), parts(1, 2, 0, 0))["share"] is None     # no change: no share
    assert moved(parts(1, 2, 0, 0), TtftParts(queue_ms=1)) is None         # a part missing


def test_a_run_without_spans_is_named_never_guessed():
    with_spans = {"server_timing": {"status": "ok", "ttft_split": {"p50": parts(1, 2, 0, 0).model_dump()}}}
    out = phase_changes([with_spans, {"server_timing": {"status": "n/a: no span joined"}}], ["a", "b"])
    assert out == {"traced": True, "missing": ["b"], "pairs": []}
    assert "no joined server spans in b" in phase_blocks(out)[1][1]
    assert phase_blocks(phase_changes([{}, {}], ["a", "b"])) == []       # no run traced: no section


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_compare_names_the_queue_when_the_servers_queue_grew(tmp_path):
    port = free_port()
    with CalibrationServer(otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces") as server:
        dirs = []
        for name, ttft, queue in (("a", 4, 1), ("b", 14, 11)):
            sc = scenario_from_dict({
                "name": name, "target": {"url": server.url, "scrape_metrics": False},
                "api": {"extra_body": {"calib": {"ttft_ms": ttft, "itl_ms": 0.5, "queue_ms": queue,
                                                 "prefill_ms": 1}}},
                "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                             "output_tokens": {"dist": "fixed", "value": 2}, "seed": 1},
                "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 6},
                "server_traces": {"otlp_port": port, "wait_s": 5, "quiet_s": 0.1},
                "output": {"dir": str(tmp_path), "run_name": name, "report": "text"}})
            dirs.append(run_scenario(sc).run_dir)
    res = compare(dirs)
    pair = res["phases"]["pairs"][0]
    m = pair["views"]["p50"]
    assert m["part"] == "queue_ms" and m["delta_ms"]["queue_ms"] == pytest.approx(10, abs=1e-6)
    assert m["delta_ms"]["prefill_ms"] == pytest.approx(0, abs=1e-6)
    text = [b[1] for b in blocks(res) if b[0] == "p"]
    assert any("the phase that moved most: queue (+10.00 ms" in t for t in text)
