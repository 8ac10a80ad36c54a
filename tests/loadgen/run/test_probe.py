"""Before the run (loadgen.targets.probe, wired in the runner): the target is reachable, takes the
key, serves api.model and accepts loadgen's fields; and what a run records about it afterwards."""
import json
import socket

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.model import ScenarioError
from loadgen.scenario.loader import scenario_from_dict
from loadgen.targets.probe import ProbeError, check_models, rejected_fields, server_message
from tests.loadgen.client.fakes import FakeOpenAI


def sc(url, tmp_path, api=None, load=None, name="run"):
    return scenario_from_dict({
        "name": "p", "target": {"url": url}, "api": api or {},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 3}},
        "load": load or {"mode": "concurrency", "concurrency": 1, "num_requests": 4},
        "output": {"dir": str(tmp_path), "run_name": name, "report": "none"}})


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the pure rules ---------------------------------------------------------------------------

def test_check_models_names_the_url_and_the_cause():
    u = "http://h:1"
    ok = {"status": 200, "models": {"data": [{"id": "a"}, {"id": "b"}]}}
    assert check_models(u, ok, None, None) == ("a", [])
    assert check_models(u, ok, "b", None) == ("b", [])
    with pytest.raises(ProbeError, match=r"^api.model: 'c' is not served by http://h:1 "
                                         r"\(http://h:1/v1/models lists 'a', 'b'\)$"):
        check_models(u, ok, "c", None)
    with pytest.raises(ProbeError, match=r"^target.url: cannot reach http://h:1/v1/models: "
                                         "connection refused"):
        check_models(u, {"status": None, "cause": "connection refused"}, "a", None)
    with pytest.raises(ProbeError, match=r"^target.server: cannot reach"):
        check_models(u, {"status": None, "cause": "x"}, "a", None, managed=True)
    with pytest.raises(ProbeError, match=r"HTTP 401.*no API key was sent: set api.api_key_env"):
        check_models(u, {"status": 401}, "a", None)
    with pytest.raises(ProbeError, match=r"HTTP 403.*the key in \$K was refused"):
        check_models(u, {"status": 403}, "a", "K")
    with pytest.raises(ProbeError, match=r"HTTP 503 \(Loading model\): the server is not ready"):
        check_models(u, {"status": 503, "body": "Loading model"}, "a", None)
    model, warnings = check_models(u, {"status": 404}, "a", None)   # no /v1/models: not checked
    assert model == "a" and "not checked" in warnings[0]
    with pytest.raises(ProbeError, match="api.model: not given"):
        check_models(u, {"status": 404}, None, None)


def test_server_message_takes_the_message_out_of_a_json_error_body():
    assert server_message('HTTP 400: {"error": {"message": "Unexpected fields: {\'x\'}", '
                          '"code": 400}}') == "HTTP 400: Unexpected fields: {'x'}"
    assert server_message('HTTP 422: {"detail": "bad \\"min_tokens\\""') \
        == 'HTTP 422: bad "min_tokens"'                      # cut short: still found
    assert server_message("HTTP 404: Not Found") == "HTTP 404: Not Found"
    assert server_message(None) == ""


def test_rejected_fields_are_the_ones_the_message_names():
    cands = ["stream_options", "stream_options.include_usage",
             "stream_options.continuous_usage_stats", "ignore_eos", "min_tokens", "calib"]
    assert rejected_fields("Unexpected fields in the request: {'ignore_eos', 'min_tokens'}",
                           cands) == ["ignore_eos", "min_tokens"]
    assert rejected_fields("Unrecognized request argument supplied: stream_options", cands) \
        == ["stream_options"]
    assert rejected_fields("extra field: continuous_usage_stats", cands) \
        == ["stream_options.continuous_usage_stats"]
    assert rejected_fields("min_tokens_x is bad; not_ignore_eos", cands) == []


# -- in a run ------------------------------------------------------------------------------------

def test_a_rejected_field_is_dropped_with_a_warning_and_the_run_succeeds(tmp_path):
    # transformers serve: 400 "Unexpected fields in the request: {'ignore_eos', 'min_tokens'}"
    with FakeOpenAI(reject=("ignore_eos", "min_tokens")) as srv:
        res = run_scenario(sc(srv.url, tmp_path, api={"extra_body": {"min_tokens": 2}}))
        bodies = list(srv.bodies)
    recs = read_records(res.run_dir / "records.jsonl")
    assert [r["status"] for r in recs] == ["ok"] * 4
    probe = res.meta["probe"]
    assert probe["dropped_fields"] == ["ignore_eos", "min_tokens"] and probe["attempts"] == 2
    assert res.summary["dropped_fields"] == ["ignore_eos", "min_tokens"]
    (w,) = res.summary["warnings"]
    assert "rejected ignore_eos, min_tokens" in w and "Unexpected fields" in w
    assert "ignore_eos" in bodies[0] and bodies[0]["max_tokens"] == 2   # the probe, min_tokens 2
    assert all("ignore_eos" not in b and "min_tokens" not in b for b in bodies[1:])
    assert len(bodies) == 1 + 4 + 1         # refused probe, accepted probe, the run
    assert json.loads((res.run_dir / "summary.json").read_text())["dropped_fields"] \
        == ["ignore_eos", "min_tokens"]


def test_a_rejected_field_stops_the_run_when_asked_to_be_strict(tmp_path):
    with FakeOpenAI(reject=("ignore_eos",)) as srv:
        with pytest.raises(ProbeError) as e:
            run_scenario(sc(srv.url, tmp_path, api={"drop_rejected_fields": False}))
        assert len(srv.bodies) == 1
    msg = str(e.value)
    assert isinstance(e.value, ScenarioError) and "\n" not in msg
    assert msg.startswith(f"api: {srv.url} rejects ignore_eos (HTTP 400: Unexpected fields")
    assert "set api.ignore_eos: false, or api.drop_rejected_fields: true" in msg
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_without_the_probe_the_fields_are_sent_as_asked(tmp_path):
    with FakeOpenAI(reject=("ignore_eos",)) as srv:
        res = run_scenario(sc(srv.url, tmp_path, api={"probe": False}))
    assert res.summary["requests_failed"] == 4 and res.summary["failures_by_kind"] == {"http": 4}
    assert res.meta["probe"]["status"] == "skipped" and res.summary["dropped_fields"] == []


def test_unreachable_target_stops_before_any_request(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(ProbeError, match=rf"^target.url: cannot reach {url}/v1/models: "
                                         r"connection refused"):
        run_scenario(sc(url, tmp_path, api={"model": "m", "connect_timeout_s": 2,
                                             "ready_timeout_s": 0}))
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_wrong_model_name_stops_before_any_request(calib_server, tmp_path):
    with pytest.raises(ProbeError, match=r"^api.model: 'tiny' is not served by .*lists "
                                         r"'calib-model'\)$"):
        run_scenario(sc(calib_server.url, tmp_path, api={"model": "tiny"}))


@pytest.mark.parametrize("key, match", [(None, "no API key was sent"),
                                        ("sk-wrong", r"the key in \$LOADGEN_PROBE_KEY was refused")])
def test_refused_key_stops_before_any_request(tmp_path, monkeypatch, key, match):
    api = {}
    if key:
        monkeypatch.setenv("LOADGEN_PROBE_KEY", key)
        api["api_key_env"] = "LOADGEN_PROBE_KEY"
    with FakeOpenAI(api_key="sk-right") as srv:
        with pytest.raises(ProbeError, match=r"^api.api_key_env: .*/v1/models answered HTTP 401 "
                                             r"\(Invalid API key\): " + match):
            run_scenario(sc(srv.url, tmp_path, api=api))
        assert srv.bodies == []
    monkeypatch.setenv("LOADGEN_PROBE_KEY", "sk-right")
    with FakeOpenAI(api_key="sk-right") as srv:
        res = run_scenario(sc(srv.url, tmp_path, api={"api_key_env": "LOADGEN_PROBE_KEY"},
                              name="ok"))
    assert res.summary["requests_completed"] == 4 and res.summary["warnings"] == []


def test_a_loading_server_is_waited_for_then_stops_with_its_own_message(tmp_path):
    # llama-server's "503 Loading model": waited for (loadgen.targets.ready), up to the deadline
    with FakeOpenAI(models_status=503) as srv:
        with pytest.raises(ProbeError, match=r"^api.ready_timeout_s: .* not ready after 0 s \(last: "
                                             r"GET /v1/models: HTTP 503 \(Loading model\)\)"):
            run_scenario(sc(srv.url, tmp_path, api={"ready_timeout_s": 0}))


def test_a_ttft_or_tpot_limit_on_a_non_streamed_run_is_refused_up_front(tmp_path):
    for key in ("ttft_ms", "tpot_ms", "itl_ms"):
        with pytest.raises(ScenarioError) as e:
            scenario_from_dict({"target": {"url": "http://127.0.0.1:9"},
                                "api": {"stream": False}, "slo": {key: 100},
                                "load": {"mode": "server", "rate": 1, "num_requests": 1}})
        assert str(e.value) == (f"slo.{key}: TTFT/TPOT/ITL need api.stream: true (a non-streamed "
                                "answer arrives whole, with no first-token time): set "
                                f"api.stream: true or drop slo.{key}")
    scenario_from_dict({"target": {"url": "http://127.0.0.1:9"}, "api": {"stream": False},
                        "slo": {"e2el_ms": 100}, "load": {"mode": "server", "rate": 1,
                                                          "num_requests": 1}})


def test_a_preset_on_a_non_streamed_run_is_warned_and_judged_on_what_it_measured(tmp_path):
    with FakeOpenAI() as srv:
        s = sc(srv.url, tmp_path, api={"stream": False})
        s.slo.preset = "server/llama3_1-8b"
        res = run_scenario(s)
    (w,) = res.summary["warnings"]
    assert w.startswith("slo: TTFT/TPOT not measured: the run was not streamed")
    assert res.summary["requests_completed"] == 4 and res.summary["goodput"] is None
    assert res.summary["goodput_rule"].startswith("not computed: TTFT/TPOT not measured")
    assert any("TTFT (limit 2000 ms): TTFT not measured" in r
               for r in res.summary["verdict"]["reasons"])


def test_a_probe_that_meets_a_server_error_warns_and_the_run_goes_on(calib_server, tmp_path):
    res = run_scenario(sc(calib_server.url, tmp_path, api={"extra_body": {
        "calib": {"fault": "http500"}}}))
    assert res.meta["probe"]["status"] == "warning"
    assert "HTTP 500" in res.summary["warnings"][0] and "went ahead" in res.summary["warnings"][0]
    assert res.summary["requests_failed"] == 4


def test_stale_connection_retries_are_in_the_records_meta_and_summary(calib_server, tmp_path):
    res = run_scenario(sc(calib_server.url, tmp_path, api={"extra_body": {
        "calib": {"close_after": "next", "itl_ms": 1}}}))
    recs = sorted(read_records(res.run_dir / "records.jsonl"), key=lambda r: r["id"])
    assert [r["status"] for r in recs] == ["ok"] * 4
    assert [r["retries"] for r in recs] == [0, 1, 0, 0]
    r = recs[1]
    assert r["scheduled_at_ns"] <= r["first_sent_at_ns"] < r["sent_at_ns"] < r["first_token_at_ns"]
    assert res.meta["client_connections"] == {"stale_connection_retries": 1,
                                              "reuse_connections": False}
    assert res.summary["requests_retried"] == 1 and res.summary["requests_failed"] == 0
