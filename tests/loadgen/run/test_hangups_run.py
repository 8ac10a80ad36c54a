"""load.cancel (clients that hang up) and api.retry (rate limits) through ``loadgen run``
against the calibration server (its own, so its per-body attempt counts are this module's):
the wire transport, aiohttp (LOADGEN_HTTP=aiohttp) and --procs 2 give the same records.
The Locust engine's twin is tests/loadgen/engine/locust/test_locust_hangups.py. No timing
asserts: token counts are exact (the stream step stops counting at after_tokens), waits are
lower bounds the sleeps guarantee."""
import json
import subprocess
import sys

import pytest

from analysis.contract import validate_run_dir
from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from servers.calib import CalibrationServer
from tests.support.hangups import assert_hung_up
from tests.support.procs import ROOT, interrupt_after, scenario_file

ENGINES = ["wire", "aiohttp", "procs2"]


@pytest.fixture(scope="module")
def calib():
    with CalibrationServer() as s:
        yield s


def tree(url, tmp_path, load, calib_body, engine="wire", name="run", **api):
    return {"name": "hang", "target": {"url": url},
            "api": {"model": "calib-model", "probe": False,
                    "extra_body": {"calib": calib_body}, **api},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 40}, "seed": 11},
            "load": load, "client": {"processes": 2 if engine == "procs2" else 1},
            "output": {"dir": str(tmp_path), "run_name": name, "report": "none"}}


def run(t, engine, monkeypatch):
    if engine == "aiohttp":
        monkeypatch.setenv("LOADGEN_HTTP", "aiohttp")
    sc = scenario_from_dict(t)
    res = run_scenario(sc)
    recs = {r["id"]: r for r in read_records(res.run_dir / "records.jsonl")}
    summary = json.loads((res.run_dir / "summary.json").read_text())
    return sc, res, recs, summary


def run_cancel(calib, tmp_path, monkeypatch, engine, n: int, cancel: dict, itl_ms: int):
    """``n`` requests 4 at a time under load.cancel ``cancel``: 40 tokens, ``itl_ms`` apart."""
    load = {"mode": "concurrency", "concurrency": 4, "num_requests": n, "cancel": cancel}
    return run(tree(calib.url, tmp_path, load, {"ttft_ms": 5, "itl_ms": itl_ms}), engine,
               monkeypatch)


@pytest.mark.parametrize("engine", ENGINES)
def test_cancel_after_tokens(calib, tmp_path, monkeypatch, engine):
    sc, res, recs, summary = run_cancel(calib, tmp_path, monkeypatch, engine, 12,
                                        {"fraction": 0.5, "after_tokens": 3}, itl_ms=10)
    hung = assert_hung_up(sc, recs, 12, 3, 40)     # and of those hung up:
    for r in (recs[i] for i in hung):
        assert (r["status"], r["error_kind"]) == ("aborted", "aborted"), r
        assert r["chunk_output_tokens"] == 3 and r["output_tokens"] == 3
        assert r["first_token_at_ns"] is not None and r["end_at_ns"] is not None
    assert summary["requests_aborted"] == len(hung)
    assert summary["requests_completed"] == 12 - len(hung) and summary["requests_failed"] == 0
    assert summary["cancel"]["with_first_token"] == len(hung)
    assert summary["cancel"]["server_running_after"]["leaked"] is None   # calib: no /metrics
    assert "no_failures" not in " ".join(summary["verdict"]["reasons"])
    assert validate_run_dir(res.run_dir) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_cancel_after_ms(calib, tmp_path, monkeypatch, engine):
    # 40 tokens 50 ms apart on absolute deadlines: 2 s; nothing can end in 150 ms
    sc, res, recs, summary = run_cancel(calib, tmp_path, monkeypatch, engine, 6,
                                        {"fraction": 1.0, "after_ms": 150}, itl_ms=50)
    for r in recs.values():
        assert r["status"] == "aborted" and "after the send" in r["error"], r
        assert r["end_at_ns"] - r["sent_at_ns"] >= 150_000_000
        assert (r["chunk_output_tokens"] or 0) < 40
    assert summary["requests_aborted"] == 6 and summary["requests_failed"] == 0


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("engine", ENGINES)
def test_429_is_rate_limited_and_retried(calib, tmp_path, monkeypatch, engine):
    load = {"mode": "concurrency", "concurrency": 4, "num_requests": 4}
    body = {"ttft_ms": 1, "itl_ms": 1, "rate_limit_first": 2, "retry_after": "1"}
    t = tree(calib.url, tmp_path, load, body, engine, name="retry",
             retry={"on": [429], "max_attempts": 3, "honor_retry_after": True})
    t["workload"]["seed"] = {"wire": 21, "aiohttp": 22, "procs2": 23}[engine]   # fresh bodies
    sc, res, recs, summary = run(t, engine, monkeypatch)
    for r in recs.values():
        assert r["status"] == "ok" and r["attempts"] == 3, r
        assert [a[0] for a in r["attempt_log"]] == [429, 429, 200]
        assert [a[3] for a in r["attempt_log"]] == ["rate_limited", "rate_limited", None]
        assert r["sent_at_ns"] == r["attempt_log"][0][1]        # latencies from the first send
        assert r["retry_after_s"] == 1.0
    assert summary["retries"]["requests"] == 4 and summary["retries"]["attempts"] == 12
    assert summary["retries"]["wait_s"] >= 4 * 2 * 0.9          # each wait ≥ Retry-After 1 s
    assert summary["requests_retried"] == 0                     # the stale resend: apart
    assert validate_run_dir(res.run_dir) == []


def test_429_without_retry_is_a_rate_limited_failure(calib, tmp_path, monkeypatch):
    load = {"mode": "concurrency", "concurrency": 2, "num_requests": 2}
    t = tree(calib.url, tmp_path, load, {"rate_limit_first": 5, "retry_after": "7"})
    t["workload"]["seed"] = 31
    sc, res, recs, summary = run(t, "wire", monkeypatch)
    for r in recs.values():
        assert (r["status"], r["http_status"], r["error_kind"]) == ("error", 429, "rate_limited")
        assert r["retry_after_s"] == 7.0 and r["attempts"] == 1 and r["attempt_log"] is None
    assert summary["failures_by_kind"] == {"rate_limited": 2}


def test_ctrl_c_during_a_retry_wait_cancels_promptly(calib, tmp_path):
    """A Retry-After of 5 minutes honoured: the run is interrupted during the wait and ends
    at once with the request cancelled (its one attempt in the log), not after 300 s."""
    t = tree(calib.url, tmp_path, {"mode": "concurrency", "concurrency": 1, "num_requests": 1},
             {"rate_limit_first": 5, "retry_after": "300"}, name="sig",
             retry={"on": [429], "max_attempts": 3, "max_wait_s": 600})
    t["workload"]["seed"] = 41
    calib.clear()
    path = scenario_file(tmp_path, t)
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", "run", str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    interrupt_after(proc, lambda: any(e.get("status") == 429 for e in calib.log()), 60,
                    timeout_s=60)
    assert proc.returncode == 130
    (r,) = read_records(tmp_path / "sig" / "records.jsonl")
    assert (r["status"], r["http_status"], r["attempts"]) == ("cancelled", 429, 1)


@pytest.mark.parametrize("bad,word", [
    ("load.cancel.fraction=1.5", "load.cancel.fraction"),
    ("load.cancel.fraction=-0.1", "load.cancel.fraction"),
    ("load.cancel={fraction: 0.5}", "after_tokens"),
    ("load.cancel={fraction: 0.5, after_tokens: 2, after_ms: 10}", "after_tokens"),
    ("api.retry.max_attempts=50", "api.retry.max_attempts"),
    ("api.retry.on=[404]", "api.retry"),
])
def test_bad_keys_one_line_exit_2(tmp_path, bad, word):
    t = tree("http://127.0.0.1:9", tmp_path, {"mode": "concurrency", "concurrency": 1,
                                                "num_requests": 1}, {})
    path = scenario_file(tmp_path, t)
    p = subprocess.run([sys.executable, "-m", "loadgen", "run", str(path), "--set", bad],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and word in lines[0] and "Traceback" not in p.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_a_stream_that_ends_before_the_hang_up_point_is_ok(calib, tmp_path, monkeypatch, engine):
    """after_tokens beyond the answer: the inline-parsed stream (the asyncio wire driver's
    hang-up path) ends at [DONE] as any other, ok, every token counted."""
    load = {"mode": "concurrency", "concurrency": 2, "num_requests": 4,
            "cancel": {"fraction": 1.0, "after_tokens": 1000}}
    sc, res, recs, summary = run(tree(calib.url, tmp_path, load, {"ttft_ms": 1, "itl_ms": 1}),
                                 engine, monkeypatch)
    assert all(r["status"] == "ok" and r["output_tokens"] == 40 for r in recs.values()), recs
    assert summary["requests_aborted"] == 0
