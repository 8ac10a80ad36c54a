"""The native engine's request shapes on the Locust engine, end to end against calibration
servers on 127.0.0.1: workload.images (the pool dealt as natively, seen by the server),
target.urls + target.balance (each worker picks with balance.pick; records name their replica),
workload.tools / api.response_format (the structured Checker on the users). Locust (gevent)
runs in subprocesses only, never in pytest."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

# find_spec, not importorskip: importing locust would monkey-patch this pytest process (gevent)
if importlib.util.find_spec("locust") is None:
    pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')",
                allow_module_level=True)

from analysis.contract import validate_run_dir
from loadgen.engine.core.plan import Plan
from loadgen.engine.locust.run import LocustOptions, run_locust
from loadgen.record import read_records
from loadgen.scenario.loader import load_scenario
from servers.calib import CalibrationServer

ROOT = Path(__file__).resolve().parents[4]
ARGS = '{"city": "Paris", "unit": "celsius"}'


@pytest.fixture(scope="module")
def second_server():
    with CalibrationServer() as server:
        yield server


def _write(tmp_path: Path, name: str, tree: dict) -> Path:
    tree = {"name": name, **tree,
            "output": {"dir": str(tmp_path / "runs"), "run_name": name, "report": "text"}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(tree))
    return p


def _locust(path: Path, workers=None, overrides=()):
    sc = load_scenario(path, list(overrides))
    res = run_locust(sc, LocustOptions(workers=workers, scenario_path=str(path),
                                       overrides=list(overrides), connect_timeout_s=60.0))
    assert not res.meta.get("crashed"), res.meta.get("crashed")
    return res, read_records(res.run_dir / "records.jsonl")


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_images_are_dealt_from_the_pool_as_natively_and_reach_the_server(calib_server,
                                                                          tmp_path):
    p = _write(tmp_path, "img", {
        "target": {"url": calib_server.url},
        "api": {"endpoint": "chat", "model": "calib-model",
                "extra_body": {"calib": {"ttft_ms": 1, "itl_ms": 1}}},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                     "output_tokens": {"dist": "fixed", "value": 4}, "shared_prefix_tokens": 0,
                     "seed": 5, "images": {"count": 2, "width": 64, "height": 48, "pool": 3}},
        "load": {"mode": "server", "rate": 40, "num_requests": 8, "warmup_requests": 2}})
    calib_server.clear()
    res, recs = _locust(p, workers=2)
    assert sorted(r["id"] for r in recs) == list(range(10))
    assert all(r["status"] == "ok" and r["input_images"] == 2 for r in recs)
    assert {r["worker"] for r in recs} == {"0", "1"}
    # request k carries pool images (2k, 2k+1) mod 3, whichever worker sent it: the server saw
    # those exact bytes (matched by the prompt's tag), as the native engine deals them
    plan = Plan(load_scenario(p))
    specs = dict(zip(range(10), iter(plan.workload)))
    sizes = plan.workload.images.sizes
    seen = {e["prompt"]: e["images"] for e in calib_server.log() if e.get("images")}
    for r in recs:
        got = seen[specs[r["id"]].prompt[:120]]
        assert [(i["mime"], i["width"], i["height"]) for i in got] == [("image/png", 64, 48)] * 2
        want = [sizes[(r["id"] * 2 + j) % 3] for j in range(2)]
        assert [i["bytes"] for i in got] == want, r["id"]
    s = json.loads((res.run_dir / "summary.json").read_text())
    assert s["images"]["requests"] == 8 and s["images"]["images"] == 16
    assert "Images (workload.images)" in (res.run_dir / "report.md").read_text()
    assert validate_run_dir(res.run_dir) == []


def _replicas(urls: list, balance: str, load: dict, output: dict) -> dict:
    return {"target": {"urls": urls, "balance": balance},
            "api": {"model": "calib-model", "probe": False,
                    "extra_body": {"calib": {"ttft_ms": 2, "itl_ms": 1}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": output, "shared_prefix_tokens": 0, "seed": 2},
            "load": load}


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_round_robin_over_two_replicas_each_worker_in_turn(calib_server, second_server,
                                                           tmp_path):
    urls = [calib_server.url, second_server.url]
    p = _write(tmp_path, "rr", _replicas(
        urls, "round_robin", {"mode": "server", "rate": 50, "num_requests": 12,
                              "warmup_requests": 2}, {"dist": "fixed", "value": 4}))
    calib_server.clear()
    second_server.clear()
    res, recs = _locust(p, workers=2)
    assert sorted(r["id"] for r in recs) == list(range(14))
    assert all(r["status"] == "ok" and r["target_url"] in urls for r in recs)
    for w in ("0", "1"):            # worker i: its sends in turn, starting at URL i
        mine = sorted((r for r in recs if r["worker"] == w), key=lambda r: r["sent_at_ns"])
        assert [r["target_url"] for r in mine] == [urls[(int(w) + k) % 2]
                                                  for k in range(len(mine))]
    # each server answered exactly the requests whose records name it
    specs = dict(zip(range(14), iter(Plan(load_scenario(p)).workload)))
    for url, server in zip(urls, (calib_server, second_server)):
        tags = sorted(e["prompt"] for e in server.log())
        assert tags == sorted(specs[r["id"]].prompt[:120] for r in recs if r["target_url"] == url)
    rows = json.loads((res.run_dir / "summary.json").read_text())["replicas"]["urls"]
    assert sorted(u["url"] for u in rows) == sorted(urls)
    assert sum(u["requests"] for u in rows) == 12 and sum(u["completed"] for u in rows) == 12
    meta = json.loads((res.run_dir / "meta.json").read_text())
    cc = meta["client_connections"]
    assert cc["balance"] == "round_robin" and sum(x["requests_sent"] for x in cc["replicas"]) == 14
    assert "Replicas (target.urls)" in (res.run_dir / "report.md").read_text()
    assert validate_run_dir(res.run_dir) == []


def test_least_in_flight_never_stacks_two_on_one_replica_while_the_other_is_idle(
        calib_server, second_server, tmp_path):
    """Two users over two replicas, answers of varied length: a user picks the replica the
    other is not on, so two records of one replica never overlap in time (round robin would)."""
    urls = [calib_server.url, second_server.url]
    p = _write(tmp_path, "lif", _replicas(
        urls, "least_in_flight", {"mode": "concurrency", "concurrency": 2, "num_requests": 16,
                                  "warmup_requests": 0}, {"dist": "uniform", "min": 1, "max": 30}))
    res, recs = _locust(p)
    assert sorted(r["id"] for r in recs) == list(range(16))
    assert all(r["status"] == "ok" for r in recs)
    assert {r["target_url"] for r in recs} == set(urls)
    for url in urls:
        spans = sorted((r["sent_at_ns"], r["end_at_ns"]) for r in recs if r["target_url"] == url)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), url
    assert json.loads((res.run_dir / "meta.json").read_text())[
        "client_connections"]["balance"] == "least_in_flight"


STRUCTURED = ("status", "finish_reason", "tool_calls", "tool_args_parsed", "tool_args_valid",
              "json_parsed", "json_valid", "output_tokens", "chunk_output_tokens")


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_tool_calls_are_checked_by_the_locust_users_as_natively(calib_server, tmp_path):
    from loadgen.run.runner import run_scenario
    sets = [f"target.url={calib_server.url}", "api.model=calib-model", "load.num_requests=6",
            "load.warmup_requests=0", "load.concurrency=2", "api.ready_timeout_s=0",
            f"output.dir={tmp_path}", "output.report=none",
            "api.extra_body=" + json.dumps({"calib": {"answer": "tool_call", "json": ARGS,
                                                      "ttft_ms": 2, "itl_ms": 1}})]
    path = ROOT / "scenarios/tools.yaml"
    nat = read_records(run_scenario(load_scenario(path, sets + ["output.run_name=nat"]))
                       .run_dir / "records.jsonl")
    sets.append("output.run_name=lc")
    sc = load_scenario(path, sets)
    res = run_locust(sc, LocustOptions(scenario_path=str(path), overrides=sets))
    loc = read_records(res.run_dir / "records.jsonl")
    assert sorted(r["id"] for r in loc) == sorted(r["id"] for r in nat) == list(range(6))
    by_id = {r["id"]: r for r in nat}
    for r in loc:
        assert (r["tool_calls"], r["tool_args_parsed"], r["tool_args_valid"]) == (1, True, True)
        assert {k: r[k] for k in STRUCTURED} == {k: by_id[r["id"]][k] for k in STRUCTURED}
    s = json.loads((res.run_dir / "summary.json").read_text())["structured"]
    assert (s["tools"]["requests"], s["tools"]["valid_share"]) == (6, 1.0)


def test_a_json_answer_off_the_schema_is_parsed_but_invalid_on_locust(calib_server, tmp_path):
    rf = {"type": "json_schema", "json_schema": {
        "name": "f", "schema": {"type": "object", "required": ["city", "summary"]}}}
    p = _write(tmp_path, "rf", {
        "target": {"url": calib_server.url},
        "api": {"endpoint": "chat", "model": "calib-model", "ignore_eos": False,
                "response_format": rf,
                "extra_body": {"calib": {"answer": "json", "json": '{"city": "Oslo"}'}}},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 16}},
        "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 4,
                 "warmup_requests": 0}})
    res, recs = _locust(p)
    assert len(recs) == 4
    for r in recs:
        assert r["status"] == "ok" and (r["json_parsed"], r["json_valid"]) == (True, False)
    g = json.loads((res.run_dir / "summary.json").read_text())["structured"]["response_format"]
    assert (g["requests"], g["parsed_share"], g["valid_share"]) == (4, 1.0, 0.0)
    assert "'summary' is a required property" in g["invalid_examples"][0]
