"""Validation up front: every number finite, a number, and in a range that can run; YAML alias
bombs; trace and sessions files checked line by line (loadgen.scenario.limits, strict, loader)."""
import json
import time

import pytest

from loadgen import cli
from loadgen.scenario.limits import MAX_PLANNED_REQUESTS, UPPER
from loadgen.scenario.loader import load_scenario, scenario_from_dict
from loadgen.scenario.model import ScenarioError
from loadgen.scenario.sessions import read_sharegpt_sessions
from loadgen.scenario.trace import read_trace, trace_offsets_ns


def tree(load=None, **top):
    t = {"target": {"url": "http://127.0.0.1:9"},
         "load": load or {"mode": "concurrency", "concurrency": 2, "num_requests": 4}}
    for dotted, v in top.items():
        node = t
        keys = dotted.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = v
    return t


def refused(t) -> str:
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(t)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("field,value,needle", [
    ("api__connect_timeout_s", float("inf"), "api.connect_timeout_s: Input should be a finite number"),
    ("api__timeout_s", float("inf"), "api.timeout_s: Input should be a finite number"),
    ("api__timeout_s", float("nan"), "api.timeout_s: Input should be a finite number"),
    ("load__drain_timeout_s", 1e300, "load.drain_timeout_s: must be at most 86,400 (1 day)"),
    ("workload__prompt_tokens", {"dist": "fixed", "value": 10 ** 8},
     "workload.prompt_tokens.value: must be at most 1,048,576"),
    ("workload__think_time_s", {"dist": "exponential", "mean": float("inf")},
     "workload.think_time_s.mean: Input should be a finite number"),
    ("power__sample_hz", 1e300, "power.sample_hz: must be at most"),
])
def test_numbers_are_finite_and_bounded(field, value, needle):
    assert needle in refused(tree(**{field: value}))


@pytest.mark.parametrize("load,needle", [
    ({"mode": "concurrency", "concurrency": True, "num_requests": 4},
     "load.concurrency: must be a number, not true/false"),
    ({"mode": "server", "rate": True, "num_requests": 4}, "load.rate: must be a number"),
    ({"mode": "server", "rate": float("inf"), "num_requests": 4}, "load.rate: Input should be a finite"),
    ({"mode": "server", "rate": 1, "duration_s": float("inf")}, "load.duration_s: Input should be a finite"),
    ({"mode": "server", "rate": 1, "duration_s": 1e300}, "load.duration_s: must be at most 604,800"),
    ({"mode": "concurrency", "concurrency": 1, "num_requests": 4, "warmup_requests": False},
     "load.warmup_requests: must be a number"),
    ({"mode": "server", "rate": 10, "num_requests": 10 ** 8},
     "load: num_requests plans 100,000,000 requests"),
    ({"mode": "server", "rate": 1000, "duration_s": 86400},
     "load: rate × duration_s plans 86,400,000 requests"),
    ({"mode": "offline", "num_requests": 10 ** 12}, "load: num_requests plans"),
    ({"mode": "server", "stages": [{"rate": 1e5, "duration_s": 100}], "num_requests": 10 ** 9},
     "plans 10,000,000 requests"),
    ({"mode": "trace", "time_scale": float("inf"), "num_requests": 3},
     "load.time_scale: Input should be a finite number"),
])
def test_load_numbers(load, needle):
    t = tree(load)
    if load["mode"] == "trace":
        t["workload"] = {"source": "trace", "path": "x.jsonl"}
    assert needle in refused(t)


def test_a_planned_run_is_refused_before_anything_is_allocated():
    t0 = time.monotonic()
    msg = refused(tree({"mode": "server", "rate": 5, "num_requests": 10 ** 12}))
    assert time.monotonic() - t0 < 5 and f"{MAX_PLANNED_REQUESTS:,}" in msg
    # a closed loop draws requests as users free up: any count (its unsent rest is one number)
    sc = scenario_from_dict(tree({"mode": "concurrency", "concurrency": 4, "num_requests": 10 ** 12}))
    assert sc.load.num_requests == 10 ** 12


def test_every_bound_names_a_real_field():
    from loadgen.scenario import model, target
    classes = {c.__name__: c for c in (model.Api, model.Dist, model.Seconds, model.Prefix,
                                      model.Workload, model.Stage, model.Load, model.Slo,
                                      model.Power, model.Sweep, target.ServerSpec, target.Target)}
    for cls_name, field in UPPER:
        assert field in classes[cls_name].model_fields, (cls_name, field)


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/tmp/abs", "~/x"])
def test_run_name_stays_inside_output_dir(name):
    assert refused(tree(output={"run_name": name})).startswith("output.run_name: ")


ALIAS_BOMB = """target: {url: "http://127.0.0.1:9"}
load: {mode: concurrency, concurrency: 1, num_requests: 1}
api:
  extra_body:
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
    i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    p = tmp_path / "bomb.yaml"
    p.write_text(ALIAS_BOMB)
    t0 = time.monotonic()
    with pytest.raises(ScenarioError, match="expands to more than 100,000 values"):
        load_scenario(p)
    assert time.monotonic() - t0 < 10


def test_recursive_alias_and_bomb_in_a_set_override(tmp_path):
    p = tmp_path / "rec.yaml"
    p.write_text('target: {url: "http://x"}\n'
                 "load: &l {mode: concurrency, concurrency: 1, num_requests: 1, x: *l}\n")
    with pytest.raises(ScenarioError, match="contains itself"):
        load_scenario(p)
    with pytest.raises(ScenarioError, match="expands to more than"):
        scenario_from_dict(tree(), ["api.extra_body.x=" + _bomb_text(7)])


def _bomb_text(levels: int) -> str:
    parts = ["&l0 [1,1,1,1,1,1,1,1,1,1]"]
    for i in range(1, levels):
        parts.append(f"&l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]")
    return "[" + ", ".join(parts) + "]"


def test_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text('target: {url: "http://127.0.0.1:9"}\n'
                 "load: {mode: concurrency, concurrency: true, num_requests: 4}\n")
    assert cli.main(["run", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "load.concurrency: must be a number" in err
    p.write_text(ALIAS_BOMB)
    assert cli.main(["run", str(p)]) == 2
    assert "Traceback" not in capsys.readouterr().err


# -- trace and sessions files, line by line ------------------------------------------------------

def trace_file(tmp_path, lines: list, name="t.jsonl"):
    p = tmp_path / name
    p.write_bytes(b"\n".join(x if isinstance(x, bytes) else json.dumps(x).encode() for x in lines))
    return p


GOOD = {"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [1]}


@pytest.mark.parametrize("bad,needle", [
    (b'{"timestamp": NaN, "input_length": 4, "output_length": 2}', ":2: not valid JSON"),
    (b'{"timestamp": Infinity, "input_length": 4, "output_length": 2}', ":2: not valid JSON"),
    (b'{"timestamp": 1e400, "input_length": 4, "output_length": 2}', ":2: not valid JSON"),
    (b'{"timestamp": 1e15, "input_length": 4, "output_length": 2}', ":2: timestamp: needs a finite"),
    (b'{"timestamp": 1, "input_length": 100000000, "output_length": 2}',
     ":2: input_length: must be an integer from 0 to 1,048,576"),
    (b'{"timestamp": 1, "input_length": 4, "output_length": true}', ":2: output_length: must be"),
    (b'{"timestamp": 1, "input_length": 4, "output_length": 2, "hash_ids": [-1]}', ":2: hash_ids:"),
    (b'{"timestamp": 1, "input_length": 4, "output_length": 2, "x": "\xff\xfe"}',
     ":2: not valid UTF-8"),
])
def test_trace_rows_are_checked_with_file_and_line(tmp_path, bad, needle):
    p = trace_file(tmp_path, [GOOD, bad])
    with pytest.raises(ScenarioError) as e:
        read_trace(p, "mooncake")
    assert f"workload.path: {p}{needle}" in str(e.value)


@pytest.mark.parametrize("row,needle", [
    ({"timestamp": 1, "prompt": 5}, ":1: prompt: must be a string"),
    ({"timestamp": 1, "messages": [{"role": "user", "content": {"a": 1}}]},
     ":1: messages[0].content: must be a string or a list"),
    ({"timestamp": 1, "messages": ["hi"]}, ":1: messages[0]: must be an object"),
])
def test_jsonl_trace_text_fields(tmp_path, row, needle):
    p = trace_file(tmp_path, [row])
    with pytest.raises(ScenarioError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        read_trace(p, "jsonl")


def test_a_replay_longer_than_seven_days_is_refused(tmp_path):
    p = trace_file(tmp_path, [GOOD, {**GOOD, "timestamp": 1e12}])     # 31 years of gap
    rows = read_trace(p, "mooncake")
    with pytest.raises(ScenarioError, match=r":2: timestamp: the replay would last"):
        trace_offsets_ns(rows, 1.0)
    assert len(trace_offsets_ns(rows, 1.0, n=1)) == 1                 # the far row not replayed


def sessions_file(tmp_path, data, raw: bytes = None):
    p = tmp_path / "conv.json"
    p.write_bytes(raw if raw is not None else json.dumps(data, indent=1).encode())
    return p


@pytest.mark.parametrize("value", [7, {"a": 1}, ["x"], None])
def test_a_turn_value_must_be_a_string(tmp_path, value):
    data = [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},
            {"conversations": [{"from": "human", "value": value}]}]
    p = sessions_file(tmp_path, data)
    with pytest.raises(ScenarioError) as e:
        read_sharegpt_sessions(p)
    line = p.read_text().splitlines().index(" {", 2) + 1    # where the second element starts
    assert str(e.value).startswith(f"workload.path: {p}:{line}: conversations[0].value: "
                                   "must be a string")


def test_sessions_file_utf8_and_json_errors_name_the_line(tmp_path):
    p = sessions_file(tmp_path, None, b'[\n{"conversations": [{"from": "human", "value": "a"}]},\n'
                                       b'{"conversations": [{"from": "human", "value": "\xff"}]}\n]')
    with pytest.raises(ScenarioError, match=r"conv.json:3: not valid UTF-8"):
        read_sharegpt_sessions(p)
    p = sessions_file(tmp_path, None, b'[\n{"conversations": []},\n{"x": NaN}\n]')
    with pytest.raises(ScenarioError, match=r"conv.json:3: not valid JSON"):
        read_sharegpt_sessions(p)


def test_sessions_scenario_with_a_bad_turn_exits_2(tmp_path, capsys):
    conv = sessions_file(tmp_path, [{"conversations": [{"from": "human", "value": 3}]}])
    p = tmp_path / "s.yaml"
    p.write_text(json.dumps({"target": {"url": "http://127.0.0.1:9"},
                             "api": {"endpoint": "chat", "probe": False},
                             "workload": {"source": "sessions", "path": str(conv)},
                             "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 4},
                             "output": {"dir": str(tmp_path / "runs")}}))
    assert cli.main(["run", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert "conversations[0].value: must be a string" in err and "\n" not in err
