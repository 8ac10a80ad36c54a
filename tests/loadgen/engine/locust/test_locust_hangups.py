"""load.cancel and api.retry on the Locust engine (gevent users, the gevent wire driver):
the same records as the native engine's (tests/loadgen/run/test_hangups_run.py), against a
calibration server of this module's own. No timing asserts."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

# find_spec, not importorskip: importing locust monkey-patches this whole pytest process with
# gevent; the engine imports it only in its own processes
if importlib.util.find_spec("locust") is None:
    pytest.skip("locust is not installed", allow_module_level=True)

from loadgen.engine.locust.run import LocustOptions, run_locust
from loadgen.record import read_records
from loadgen.scenario.loader import load_scenario
from servers.calib import CalibrationServer
from tests.support.hangups import assert_hung_up


@pytest.fixture(scope="module")
def calib():
    with CalibrationServer() as s:
        yield s


def _run(tmp_path: Path, url: str, load: dict, body: dict, name: str, seed: int, **api):
    tree = {"name": name, "target": {"url": url},
            "api": {"model": "calib-model", "probe": False, "extra_body": {"calib": body}, **api},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 40}, "seed": seed},
            "load": load, "output": {"dir": str(tmp_path / "runs"), "run_name": name,
                                     "report": "none"}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(tree))
    sc = load_scenario(p)
    res = run_locust(sc, LocustOptions(workers=None, scenario_path=str(p),
                                       connect_timeout_s=60.0), None)
    recs = {r["id"]: r for r in read_records(res.run_dir / "records.jsonl")}
    return sc, recs, json.loads((res.run_dir / "summary.json").read_text())


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_cancel_after_tokens_and_after_ms(tmp_path, calib):
    sc, recs, summary = _run(tmp_path, calib.url, {
        "mode": "concurrency", "concurrency": 4, "num_requests": 12,
        "cancel": {"fraction": 0.5, "after_tokens": 3}}, {"ttft_ms": 5, "itl_ms": 10}, "tok", 11)
    hung = assert_hung_up(sc, recs, 12, 3, 40)
    assert summary["requests_aborted"] == len(hung) and summary["requests_failed"] == 0

    sc, recs, summary = _run(tmp_path, calib.url, {
        "mode": "concurrency", "concurrency": 3, "num_requests": 3,
        "cancel": {"fraction": 1.0, "after_ms": 150}}, {"ttft_ms": 5, "itl_ms": 50}, "ms", 12)
    for r in recs.values():
        assert r["status"] == "aborted" and "after the send" in r["error"], r
        assert r["end_at_ns"] - r["sent_at_ns"] >= 150_000_000
        assert (r["chunk_output_tokens"] or 0) < 40


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_429_retried_with_every_attempt_recorded(tmp_path, calib):
    sc, recs, summary = _run(tmp_path, calib.url, {
        "mode": "concurrency", "concurrency": 2, "num_requests": 2},
        {"ttft_ms": 1, "itl_ms": 1, "rate_limit_first": 2, "retry_after": "1"}, "retry", 13,
        retry={"on": [429], "max_attempts": 3})
    for r in recs.values():
        assert r["status"] == "ok" and r["attempts"] == 3, r
        assert [a[0] for a in r["attempt_log"]] == [429, 429, 200]
        assert r["sent_at_ns"] == r["attempt_log"][0][1] and r["retry_after_s"] == 1.0
    assert summary["retries"]["requests"] == 2 and summary["retries"]["attempts"] == 6


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_hang_up_due_in_the_retry_wait_is_not_sent_again(tmp_path, calib):
    """load.cancel after_ms counts from the FIRST send (issue 41 item 14): due inside a
    Retry-After wait, the request is aborted there with its one attempt, never resent."""
    sc, recs, summary = _run(tmp_path, calib.url, {
        "mode": "concurrency", "concurrency": 2, "num_requests": 2,
        "cancel": {"fraction": 1.0, "after_ms": 300}},
        {"ttft_ms": 5, "itl_ms": 50, "rate_limit_first": 1, "retry_after": "2"}, "hangwait", 14,
        retry={"on": [429], "max_attempts": 3})
    for r in recs.values():
        assert (r["status"], r["error_kind"]) == ("aborted", "aborted"), r
        assert "after the first send" in r["error"]
        assert r["attempts"] == 1 and [a[0] for a in r["attempt_log"]] == [429], r
        assert r["end_at_ns"] - r["sent_at_ns"] >= 300_000_000


def test_after_ms_hangs_up_a_non_streamed_request(tmp_path, calib):
    """api.stream false with load.cancel after_ms (issue 41 item 20): aborted, as a stream."""
    sc, recs, summary = _run(tmp_path, calib.url, {
        "mode": "concurrency", "concurrency": 2, "num_requests": 2,
        "cancel": {"fraction": 1.0, "after_ms": 150}}, {"ttft_ms": 5, "itl_ms": 50}, "nostream",
        15, stream=False)
    for r in recs.values():
        assert (r["status"], r["error_kind"]) == ("aborted", "aborted"), r
        assert r["end_at_ns"] - r["sent_at_ns"] >= 150_000_000
    assert summary["requests_aborted"] == 2 and summary["requests_failed"] == 0
