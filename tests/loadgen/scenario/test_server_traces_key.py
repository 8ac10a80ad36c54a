"""The scenario's server_traces key and api.traceparent switch; the receiver's port taken is one
line naming server_traces.otlp_port."""
import socket
from types import SimpleNamespace

import pytest

from loadgen.run.server_traces import receiving
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import ScenarioError

BASE = {"target": {"url": "http://127.0.0.1:9"}, "load": {"mode": "concurrency",
                                                         "concurrency": 1, "num_requests": 1}}


def test_defaults_and_bounds():
    sc = scenario_from_dict({**BASE, "server_traces": {"otlp_port": 0}})
    assert sc.server_traces.otlp_port == 0 and sc.server_traces.wait_s == 5.0
    assert sc.api.traceparent is True and scenario_from_dict(BASE).server_traces is None
    for bad in ({"otlp_port": 70000}, {"otlp_port": -1}, {"port": 1}, {"wait_s": 10_000}):
        with pytest.raises(ScenarioError):
            scenario_from_dict({**BASE, "server_traces": bad})
    with pytest.raises(ScenarioError):
        scenario_from_dict({**BASE, "api": {"traceparent": "no"}})


def test_a_taken_port_is_one_line_naming_the_key(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        sc = scenario_from_dict({**BASE, "server_traces": {"otlp_port": s.getsockname()[1]}})
        run = SimpleNamespace(sc=sc, run_dir=tmp_path)
        with pytest.raises(ScenarioError, match=r"^server_traces.otlp_port: cannot listen"):
            with receiving(run):
                pass


def test_a_managed_vllm_is_started_with_the_tracing_flags():
    from loadgen.run.server_traces import traced_spec
    from servers.vllm.argv import build_vllm_argv
    rx = SimpleNamespace(endpoint="http://127.0.0.1:4318/v1/traces")
    sc = scenario_from_dict({**BASE, "target": {"server": {"kind": "vllm", "model": "m",
                                                            "args": {"max_num_batched_tokens": 8}}},
                             "server_traces": {"otlp_port": 4318}})
    spec = traced_spec(sc.target.server, rx)
    argv = build_vllm_argv(spec, 8000, prefix=["vllm"])
    i = argv.index("--otlp-traces-endpoint")
    assert argv[i + 1] == rx.endpoint and "--collect-detailed-traces" in argv
    assert "--max-num-batched-tokens" in argv
    assert spec.env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    assert sc.target.server.args == {"max_num_batched_tokens": 8}      # the scenario untouched
    assert traced_spec(sc.target.server, None) is sc.target.server


def test_a_managed_jax_server_is_started_with_its_otlp_flag_and_a_command_one_untouched():
    from loadgen.run.server_traces import traced_spec
    from loadgen.targets.server_argv import build_argv
    rx = SimpleNamespace(endpoint="http://127.0.0.1:4318/v1/traces")
    jax = scenario_from_dict({**BASE, "target": {"server": {"kind": "jax"}}}).target.server
    argv = build_argv(traced_spec(jax, rx), 8000)
    assert argv[argv.index("--otlp-traces-endpoint") + 1] == rx.endpoint
    assert "--collect-detailed-traces" not in argv and jax.args == {}
    cmd = scenario_from_dict({**BASE, "target": {"server": {"kind": "command",
                                                            "command": ["srv", "{port}"]}}}).target.server
    assert traced_spec(cmd, rx) is cmd


def test_a_sweeps_shared_server_is_traced_to_one_pinned_port_and_resumes():
    from loadgen.run.server_traces import shared_spec
    from loadgen.multirun.sweep import Sweep
    from loadgen.targets.server_argv import build_argv
    tree = {**BASE, "target": {"server": {"kind": "jax"}}, "server_traces": {"otlp_port": 0},
            "sweep": {"param": "load.concurrency", "values": [1, 2]}}
    a, b = Sweep(scenario_from_dict(tree)), Sweep(scenario_from_dict(tree))
    port = a.sc.server_traces.otlp_port
    assert port != 0 and a.fp == b.fp        # the pinned port does not change the fingerprint
    argv = build_argv(shared_spec(a.sc), 8000)
    assert argv[argv.index("--otlp-traces-endpoint") + 1] == f"http://127.0.0.1:{port}/v1/traces"
    fixed = {**tree, "server_traces": {"otlp_port": 4318}}
    assert Sweep(scenario_from_dict(fixed)).sc.server_traces.otlp_port == 4318
    untraced = {k: v for k, v in tree.items() if k != "server_traces"}
    assert shared_spec(Sweep(scenario_from_dict(untraced)).sc).args == {}


def test_vllm_sends_its_batches_often_unless_told_otherwise():
    from loadgen.run.server_traces import traced_spec
    rx = SimpleNamespace(endpoint="http://127.0.0.1:4318/v1/traces")
    sc = scenario_from_dict({**BASE, "target": {"server": {"kind": "vllm", "model": "m"}}})
    assert traced_spec(sc.target.server, rx).env["OTEL_BSP_SCHEDULE_DELAY"] == "200"
    own = scenario_from_dict({**BASE, "target": {"server": {"kind": "vllm", "model": "m",
                                                            "env": {"OTEL_BSP_SCHEDULE_DELAY": "5000"}}}})
    assert traced_spec(own.target.server, rx).env["OTEL_BSP_SCHEDULE_DELAY"] == "5000"
