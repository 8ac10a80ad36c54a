"""Ready before measured (loadgen.targets.ready): the wait for /health and for answers that are not
503, its live line, its one-line timeout; and a run against a server that is still warming up."""
import asyncio
import io
import json
import socket

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import ScenarioError
from loadgen.targets.probe import ProbeError
from loadgen.targets.ready import (EXTERNAL_READY_TIMEOUT_S, MANAGED_READY_TIMEOUT_S, LiveLine,
                                   ready_timeout_s, wait_ready)
from tests.loadgen.targets.ready_fake import MODEL, WarmingServer


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(url, timeout_s=30.0, out=None, **kw):
    return asyncio.run(wait_ready(url, None, {}, 5.0, timeout_s, out=out or io.StringIO(), **kw))


# -- the live line ----------------------------------------------------------------------------

def test_on_a_terminal_one_line_is_rewritten_about_once_a_second_and_cleared():
    out, clock = Terminal(), Clock()
    line = LiveLine("waiting for http://h:1 to be ready", out, clock)
    assert line.update("GET /health: HTTP 503")
    clock.t += 0.4
    assert not line.update(lambda: pytest.fail("not due: the detail is not even read"))
    clock.t += 0.8
    assert line.update(lambda: "POST /v1/completions: HTTP 503: warming up")
    line.close()
    assert out.getvalue() == (
        "\r\x1b[2Kwaiting for http://h:1 to be ready (0 s): GET /health: HTTP 503"
        "\r\x1b[2Kwaiting for http://h:1 to be ready (1 s): POST /v1/completions: HTTP 503: "
        "warming up\r\x1b[2K")


def test_elsewhere_plain_lines_every_ten_seconds_and_a_quick_wait_prints_nothing():
    out, clock = io.StringIO(), Clock()
    line = LiveLine("starting jax server", out, clock)
    for dt, detail in [(0, "a"), (5, "b"), (10, "compiling"), (15, "d"), (20, "e")]:
        clock.t = 100.0 + dt
        line.update(detail)
    line.close()
    assert out.getvalue() == ("starting jax server (10 s): compiling\n"
                              "starting jax server (20 s): e\n")


def test_default_timeouts_managed_and_external():
    class Api:
        ready_timeout_s = None
    assert ready_timeout_s(Api(), managed=True) == MANAGED_READY_TIMEOUT_S == 600
    assert ready_timeout_s(Api(), managed=False) == EXTERNAL_READY_TIMEOUT_S == 120
    Api.ready_timeout_s = 5
    assert ready_timeout_s(Api(), managed=True) == 5.0
    sc = scenario_from_dict({"target": {"url": "http://127.0.0.1:9"},
                             "load": {"mode": "server", "rate": 1, "num_requests": 1}},
                            ["api.ready_timeout_s=30"])
    assert sc.api.ready_timeout_s == 30
    with pytest.raises(ScenarioError, match=r"^api.ready_timeout_s: "):
        scenario_from_dict({"target": {"url": "http://127.0.0.1:9"},
                            "load": {"mode": "server", "rate": 1, "num_requests": 1}},
                           ["api.ready_timeout_s=-1"])


# -- the wait -----------------------------------------------------------------------------------

def test_503s_on_health_and_models_are_waited_through():
    with WarmingServer(health_503=3, models_503=2) as srv:
        models, w = wait(srv.url)
        counts = dict(srv.counts)
    assert models["status"] == 200 and models["models"]["data"][0]["id"] == MODEL
    assert w.checks == 5 and w.last == "GET /health: HTTP 503 ({\"status\": \"starting\"})"
    assert counts == {"health": 4, "models": 6, "post": 0}


def test_a_server_without_health_is_asked_once_and_not_waited_for():
    with WarmingServer(health=False) as srv:
        models, w = wait(srv.url)
    assert models["status"] == 200 and w.checks == 0 and w.describe()["waited_s"] == 0.0


def test_nothing_listening_returns_at_once_for_the_probe_to_name_the_cause():
    # ready_timeout_s 0: one look (a positive timeout waits for the port: test_ready_port.py)
    models, w = wait(f"http://127.0.0.1:{closed_port()}", timeout_s=0)
    assert models["status"] is None and "refused" in models["cause"] and w.checks == 0


def test_timeout_is_one_line_naming_the_field_and_the_last_status():
    out = io.StringIO()
    with WarmingServer(health_503=10**6) as srv:
        with pytest.raises(ProbeError) as e:
            wait(srv.url, timeout_s=0, out=out)
    msg = str(e.value)
    assert "\n" not in msg and isinstance(e.value, ScenarioError)
    assert msg == (f"api.ready_timeout_s: {srv.url} was not ready after 0 s (last: GET /health: "
                   'HTTP 503 ({"status": "starting"})); wait for the server, or raise '
                   "api.ready_timeout_s")
    assert out.getvalue() == ""        # not a terminal, and no 10 s passed: nothing printed


# -- in a run -------------------------------------------------------------------------------------

def scenario(url, tmp_path, api=None, name="run"):
    return scenario_from_dict({
        "name": "ready", "target": {"url": url}, "api": api or {},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 3}},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 3},
        "output": {"dir": str(tmp_path), "run_name": name, "report": "none"}})


def test_a_warming_server_is_waited_for_and_then_measured(tmp_path):
    # the JAX server while it compiles: /v1/models 200, /health 503, POST 503 "warming up"
    with WarmingServer(health_503=2, post_503=2) as srv:
        res = run_scenario(scenario(srv.url, tmp_path))
        posts = srv.counts["post"]
    recs = read_records(res.run_dir / "records.jsonl")
    assert [r["status"] for r in recs] == ["ok"] * 3 and posts == 2 + 1 + 3
    probe = res.meta["probe"]
    assert probe["status"] == "ok" and probe["warnings"] == [] and probe["attempts"] == 3
    assert probe["ready"]["checks"] == 4 and "warming up" in probe["ready"]["last"]
    assert probe["ready"]["timeout_s"] == EXTERNAL_READY_TIMEOUT_S
    meta = json.loads((res.run_dir / "meta.json").read_text())
    assert meta["probe"]["ready"]["checks"] == 4


def test_a_probe_503_past_the_deadline_stops_before_any_measured_request(tmp_path):
    with WarmingServer(post_503=10**6) as srv:
        with pytest.raises(ProbeError, match=r"^api.ready_timeout_s: .* not ready after 0 s "
                                             r"\(last: POST .*/v1/completions: HTTP 503: the "
                                             r"server is still warming up"):
            run_scenario(scenario(srv.url, tmp_path, api={"ready_timeout_s": 0}))
        assert srv.counts["post"] == 1
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_without_the_probe_health_is_still_waited_for(tmp_path):
    with WarmingServer(health_503=2) as srv:
        res = run_scenario(scenario(srv.url, tmp_path, api={"probe": False}))
    assert res.summary["requests_completed"] == 3
    assert res.meta["probe"]["status"] == "skipped" and res.meta["probe"]["ready"]["checks"] == 2
