"""server_traces end to end: the calibration server sends one OTLP span per request with known
queue and prefill times (servers/calib/spans.py, in the request's own trace); loadgen's receiver
takes them, the join puts them on the records, summary.json splits the TTFT. Every record's
``server_timing`` equals what the server sent: one process here; --procs 2 (records.jsonl and
records.arrow) and Locust (slow)."""
from __future__ import annotations

import importlib.util
import json
import socket

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from servers.calib import CalibrationServer

N = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def traced():
    port = free_port()
    with CalibrationServer(otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces") as s:
        yield s, port


def tree(url, port, tmp_path, name, processes=1, traceparent=True):
    return {"name": name, "target": {"url": url, "scrape_metrics": False},
            "api": {"extra_body": {"calib": {"ttft_ms": 4, "itl_ms": 0.5}},
                    "traceparent": traceparent},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 3}, "seed": 1},
            "load": {"mode": "concurrency", "concurrency": 4, "num_requests": N,
                     "warmup_requests": 1},
            "client": {"processes": processes},
            "server_traces": {"otlp_port": port, "wait_s": 5, "quiet_s": 0.1},
            "output": {"dir": str(tmp_path), "run_name": name, "report": "text"}}


def check(res, server):
    recs = read_records(res.run_dir / "records.jsonl")
    sent = server.spans()["sent"]
    assert len(recs) == N + 1 and all(r["status"] == "ok" for r in recs)
    for r in recs:
        want = sent[r["trace_id"]]                 # the server's span is in the record's trace
        got = r["server_timing"]
        assert got["source"] == "otlp"
        for field, attr in (("queue_ms", "time_in_queue"), ("prefill_ms", "time_in_model_prefill"),
                            ("server_ttft_ms", "time_to_first_token"), ("server_e2e_ms", "e2e"),
                            ("decode_ms", "time_in_model_decode"),
                            ("scheduler_ms", "time_in_scheduler")):
            assert got[field] == pytest.approx(want["gen_ai.latency." + attr] * 1e3, abs=1e-9)
    st = json.loads((res.run_dir / "summary.json").read_text())["server_timing"]
    assert st["status"] == "ok" and st["joined"] == st["records_traced"] == N
    assert st["phases"]["queue_ms"]["count"] == N and st["bad_spans"] == {}
    split = st["ttft_split"]
    assert split["p50"] is not None
    parts = sum(split["p50"][k] for k in ("queue_ms", "prefill_ms", "server_other_ms", "rest_ms"))
    assert parts == pytest.approx(split["p50"]["client_ttft_ms"], abs=1e-6)
    assert split["rest_ms"]["min"] >= 0          # the client saw its first token after the server
    slow = split["slowest"]
    assert len(slow) == 10 and slow[0]["client_ttft_ms"] >= slow[-1]["client_ttft_ms"]
    for row in slow:                              # each request's parts add up to its TTFT
        assert sum(row[k] for k in ("queue_ms", "prefill_ms", "server_other_ms", "rest_ms")) \
            == pytest.approx(row["client_ttft_ms"], abs=0.1)
    return recs


def test_one_process_every_record_gets_what_the_server_sent(traced, tmp_path):
    server, port = traced
    res = run_scenario(scenario_from_dict(tree(server.url, port, tmp_path, "one")))
    recs = check(res, server)
    assert len({r["trace_id"] for r in recs}) == len(recs)
    md = (res.run_dir / "report.md").read_text()
    assert "## Server traces" in md and "12 of 12 traced requests joined" in md


def test_traceparent_off_joins_nothing_and_says_why(traced, tmp_path):
    server, port = traced
    res = run_scenario(scenario_from_dict(tree(server.url, port, tmp_path, "off",
                                               traceparent=False)))
    recs = read_records(res.run_dir / "records.jsonl")
    assert all(r["trace_id"] is None and r["server_timing"] is None for r in recs)
    st = json.loads((res.run_dir / "summary.json").read_text())["server_timing"]
    assert st["status"].startswith("n/a: no record carries a trace id")
    assert st["phases"]["queue_ms"]["p50"] is None
    assert "n/a: no record carries a trace id" in (res.run_dir / "report.md").read_text()


@pytest.mark.slow
def test_two_processes(traced, tmp_path):
    server, port = traced
    check(run_scenario(scenario_from_dict(tree(server.url, port, tmp_path, "two", 2))), server)


@pytest.mark.slow
def test_records_arrow_of_two_processes_is_joined(traced, tmp_path):
    """output.records: arrow (issue 42): the merged records.arrow rewritten by the join, a batch
    at a time; the summary reads it; exported, every record has what the server sent."""
    from analysis.contract.columnar_io import export_jsonl
    server, port = traced
    t = tree(server.url, port, tmp_path, "arrow", 2)
    t["output"]["records"] = "arrow"
    res = run_scenario(scenario_from_dict(t))
    assert not (res.run_dir / "records.jsonl").exists()
    export_jsonl(res.run_dir / "records.arrow", res.run_dir / "records.jsonl")
    check(res, server)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("locust") is None, reason="the locust extra is not installed")
def test_locust_engine(traced, tmp_path):
    import yaml
    from loadgen.engine.locust.run import LocustOptions, run_locust
    from loadgen.scenario.loader import load_scenario
    server, port = traced
    p = tmp_path / "loc.yaml"
    p.write_text(yaml.safe_dump(tree(server.url, port, tmp_path, "loc")))
    check(run_locust(load_scenario(p), LocustOptions(workers=2, scenario_path=str(p))), server)


def test_the_split_plot_draws_the_median_the_tail_and_the_slowest():
    from analysis.report.server_traces import server_timing_blocks, split_png
    row = {"queue_ms": 1.0, "prefill_ms": 2.0, "server_other_ms": 0.5, "rest_ms": 0.7,
           "client_ttft_ms": 4.2, "id": 3}
    sp = {"p50": row, "slowest_1pct": {**row, "requests": 1}, "slowest": [row, row]}
    img, note = split_png(sp)
    assert img and "TTFT split" in note
    st = {"status": "ok", "joined": 1, "records_traced": 1, "phases": {}, "ttft_split": sp}
    kinds = [b[0] for b in server_timing_blocks({"server_timing": st}, with_plots=True)]
    assert kinds == ["h", "p", "table", "p", "table", "img"]
