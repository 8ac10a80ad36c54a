"""Wait for the port (loadgen.targets.ready): ``loadgen serve calib & loadgen run`` at once finds
nothing listening yet. Before, the run stopped at once ("connection refused"), though
api.ready_timeout_s promises a wait; now a refused connection is waited through within the same
timeout, with one line saying so, and the timeout is one line naming the field."""
import asyncio
import io
import socket
import threading

import pytest
from aiohttp import web

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from loadgen.targets.probe import ProbeError
from loadgen.targets.ready import wait_ready
from servers.calib import make_app


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LateCalib:
    """The calibration server in a thread, bound to ``port`` only once ``start()`` is called."""

    def __init__(self, port: int):
        self.port, self.loop, self.runner = port, None, None
        self.up, self.thread = threading.Event(), None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(make_app(log=False), access_log=None)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", self.port).start())
        self.up.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()

    def stop(self) -> None:
        if self.thread is not None:
            assert self.up.wait(10), "the late server never bound its port"
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


class StartsOnWaitingLine(io.StringIO):
    """stderr: the client's "waiting ... nothing listens there yet" line (written after its first
    refused attempt) starts the late server: the ordering is the refusal, not a sleep."""

    def __init__(self, server: LateCalib):
        super().__init__()
        self.server, self.started = server, False

    def write(self, s: str) -> int:
        n = super().write(s)
        if "nothing listens there yet" in s and not self.started:
            self.started = True
            self.server.start()
        return n


def test_a_server_that_binds_after_the_first_refusal_is_waited_for(tmp_path):
    port = closed_port()
    late = LateCalib(port)
    out = StartsOnWaitingLine(late)
    try:
        models, w = asyncio.run(wait_ready(f"http://127.0.0.1:{port}", None, {}, 5.0, 60.0,
                                           out=out))
    finally:
        late.stop()
    assert out.started and models["status"] == 200 and w.checks >= 1
    lines = [ln for ln in out.getvalue().splitlines() if "nothing listens there yet" in ln]
    assert lines == [f"waiting up to 60 s (api.ready_timeout_s) for http://127.0.0.1:{port}: "
                     "connection refused (nothing listens there yet)"]
    assert "connection refused" in w.describe()["last"]


def test_a_run_started_before_its_server_succeeds(tmp_path, monkeypatch):
    port = closed_port()
    late = LateCalib(port)
    out = StartsOnWaitingLine(late)
    monkeypatch.setattr("sys.stderr", out)
    sc = scenario_from_dict({
        "name": "late", "target": {"url": f"http://127.0.0.1:{port}"},
        "api": {"ready_timeout_s": 60},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 3}},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 3},
        "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}})
    try:
        res = run_scenario(sc)
    finally:
        late.stop()
    assert out.started
    recs = read_records(res.run_dir / "records.jsonl")
    assert [r["status"] for r in recs] == ["ok"] * 3
    assert "connection refused" in res.meta["probe"]["ready"]["last"]


def test_nothing_listening_fails_after_the_timeout_in_one_line():
    port = closed_port()
    out = io.StringIO()
    with pytest.raises(ProbeError) as e:
        asyncio.run(wait_ready(f"http://127.0.0.1:{port}", None, {}, 5.0, 0.3, out=out))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg == (f"api.ready_timeout_s: http://127.0.0.1:{port} was not ready after 0.3 s "
                   "(last: GET /v1/models: connection refused (nothing listens there)); wait for "
                   "the server, or raise api.ready_timeout_s")
    assert out.getvalue().count("nothing listens there yet") == 1


def test_a_zero_timeout_still_looks_once_and_names_the_cause_at_once():
    models, w = asyncio.run(wait_ready(f"http://127.0.0.1:{closed_port()}", None, {}, 5.0, 0,
                                       out=io.StringIO()))
    assert models["status"] is None and "refused" in models["cause"] and w.checks == 0
