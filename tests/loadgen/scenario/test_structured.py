"""loadgen/scenario/structured.py: workload.tools, workload.tool_choice and api.response_format are
strict, their schemas checked as JSON Schema, refused on completions, each fault one line naming
the field; the api carries them into every request body (the Locust engine's base_body too)."""
from __future__ import annotations

import copy
import json

import pytest

from loadgen.client.request import base_body, request_body
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import ScenarioError

TOOL = {"type": "function", "function": {"name": "get_weather", "description": "weather",
                                         "parameters": {"type": "object",
                                                        "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}
RF = {"type": "json_schema", "json_schema": {"name": "forecast", "strict": True,
                                             "schema": {"type": "object",
                                                        "properties": {"a": {"type": "string"}}}}}
BASE = {"target": {"url": "http://127.0.0.1:9"}, "api": {"endpoint": "chat"},
        "workload": {"tools": [TOOL], "tool_choice": "auto"},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 2}}


def tree(**patch) -> dict:
    t = copy.deepcopy(BASE)
    for dotted, v in patch.items():
        *path, last = dotted.split("__")
        node = t
        for p in path:
            node = node.setdefault(p, {})
        if v is None:
            node.pop(last, None)
        else:
            node[last] = v
    return t


def test_the_body_carries_tools_choice_and_response_format_as_given():
    sc = scenario_from_dict(tree(api__response_format=RF,
                                 workload__tool_choice={"type": "function",
                                                        "function": {"name": "get_weather"}}))
    body = base_body(sc.api, "m")                       # what both engines build from the api
    assert body["tools"] == [TOOL] and body["response_format"] == RF
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    sent = json.loads(request_body(body, True, "hi", 8))
    assert sent["tools"] == [TOOL] and sent["messages"] == [{"role": "user", "content": "hi"}]
    plain = scenario_from_dict(tree(workload={}))
    assert plain.api.structured == {} and "tools" not in base_body(plain.api, "m")


def test_the_resolved_scenario_dumps_and_reloads_as_written():
    sc = scenario_from_dict(tree(api__response_format=RF))
    dumped = sc.model_dump(mode="json")              # scenario.yaml, sweep points
    assert dumped["api"]["response_format"]["json_schema"]["schema"] == RF["json_schema"]["schema"]
    assert "schema_" not in dumped["api"]["response_format"]["json_schema"]
    again = scenario_from_dict(dumped)
    assert again.api.structured == sc.api.structured


def test_overrides_reach_the_body_and_json_object_needs_no_schema():
    sc = scenario_from_dict(tree(), ["workload.tool_choice=required",
                                     'api.response_format={"type": "json_object"}'])
    assert sc.api.structured["tool_choice"] == "required"
    assert sc.api.structured["response_format"] == {"type": "json_object"}


def test_ignore_eos_defaults_to_false_with_tools_or_response_format_unless_given():
    # vLLM 0.32 with ignore_eos generates past the JSON's end to max_tokens: every answer
    # then failed its check (bench/compat: "Extra data"); a tool call / JSON answer ends itself
    for t in (tree(), tree(workload={}, api__response_format=RF)):
        sc = scenario_from_dict(t)
        assert sc.api.ignore_eos is False and "ignore_eos" not in base_body(sc.api, "m")
        assert scenario_from_dict(sc.model_dump(mode="json")).api.ignore_eos is False
    kept = scenario_from_dict(tree(api__ignore_eos=True))
    assert kept.api.ignore_eos is True and base_body(kept.api, "m")["ignore_eos"] is True
    assert scenario_from_dict(tree(workload={})).api.ignore_eos is True     # plain chat: as before


@pytest.mark.parametrize("patch, field", [
    ({"api__endpoint": "completions"}, "workload.tools: needs api.endpoint: chat"),
    ({"workload__tools": None}, "workload.tool_choice: needs workload.tools"),
    ({"workload__tool_choice": "always"}, "workload.tool_choice"),
    ({"workload__tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "workload.tool_choice: function 'nope' is not one of"),
    ({"workload__tools": [TOOL, TOOL]}, "workload.tools: the tool name 'get_weather' is given twice"),
    ({"workload__tools": [{"type": "function", "function": {"name": "a b"}}]},
     "workload.tools.0.function.name"),
    ({"workload__tools": [{"type": "code", "function": {"name": "a"}}]}, "workload.tools.0.type"),
    ({"workload__tools": [{"type": "function", "function": {"name": "a", "params": {}}}]},
     "workload.tools.0.function.params: unknown key (did you mean 'parameters'?)"),
    ({"workload__tools": [{"type": "function", "function": {
        "name": "a", "parameters": {"type": "objekt"}}}]},
     "workload.tools.0.function.parameters: not a valid JSON Schema at type"),
    ({"workload__tools": "tools.json"}, "workload.tools"),
    ({"api__response_format": {"type": "json_schema"}}, "api.response_format: type json_schema needs"),
    ({"api__response_format": {"type": "text"}}, "api.response_format.type"),
    ({"api__response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"required": "a"}}}}, "api.response_format.json_schema.schema"),
    ({"api__response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
     "api.response_format.json_schema.name"),
    ({"api__endpoint": "completions", "workload": {}, "api__response_format": {"type": "json_object"}},
     "api.response_format: needs api.endpoint: chat"),
])
def test_bad_input_is_one_line_naming_the_field(patch, field):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tree(**patch))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(field), msg
