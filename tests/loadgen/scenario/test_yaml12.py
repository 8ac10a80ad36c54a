"""Scenarios are read as YAML 1.2 (analysis.contract.yaml12): on/off/yes/no are strings, only
true/false are booleans, and a boolean field given a YAML 1.1 word is refused in one line.
Every case feeds YAML TEXT to the real loader (a file, or ``--set``), as a user would."""
from __future__ import annotations

import pytest

from analysis.contract import yaml12
from loadgen.scenario.loader import load_scenario
from loadgen.scenario.strict import ScenarioError

BASE = """\
name: yaml12
target: {url: http://127.0.0.1:8000}
load: {mode: concurrency, concurrency: 1, num_requests: 2}
"""


def _load(tmp_path, extra: str = "", overrides=(), base: str = BASE):
    f = tmp_path / "s.yaml"
    f.write_text(base + extra)
    return load_scenario(f, list(overrides))


def test_retry_on_as_documented_loads(tmp_path):
    sc = _load(tmp_path, "api:\n  retry: {on: [429, 503], max_attempts: 3, honor_retry_after: true}\n")
    assert sc.api.retry.on == [429, 503] and sc.api.retry.max_attempts == 3


@pytest.mark.parametrize("word", ["on", "off", "yes", "no", "On", "OFF"])
def test_server_args_keep_the_word(tmp_path, word):
    base = BASE.replace("{url: http://127.0.0.1:8000}", f"{{server: {{kind: jax, args: {{prefix_cache: {word}}}}}}}")
    sc = _load(tmp_path, base=base)
    assert sc.target.server.args == {"prefix_cache": word}


def test_a_model_named_on_is_the_string_on(tmp_path):
    sc = _load(tmp_path, "api: {models: [{name: on}, {name: off}]}\n")
    assert [m.name for m in sc.api.models] == ["on", "off"]


@pytest.mark.parametrize("word", ["on", "off", "yes", "no", "Yes", "NO", "y", "N"])
def test_a_yaml11_word_for_a_boolean_field_is_refused(tmp_path, word):
    with pytest.raises(ScenarioError) as e:
        _load(tmp_path, f"api: {{stream: {word}}}\n")
    assert str(e.value) == (f"{tmp_path / 's.yaml'}: api.stream: '{word}' is a YAML 1.1 boolean; "
                            "write true or false")


def test_a_quoted_word_for_an_optional_boolean_is_refused(tmp_path):
    with pytest.raises(ScenarioError, match=r"sweep.reset_prefix_cache: 'yes' is a YAML 1.1"):
        _load(tmp_path, "sweep: {param: load.concurrency, values: [1, 2], reset_prefix_cache: 'yes'}\n")


@pytest.mark.parametrize("word, want", [("true", True), ("True", True), ("FALSE", False)])
def test_true_and_false_stay_booleans(tmp_path, word, want):
    assert _load(tmp_path, f"api: {{stream: {word}}}\n").api.stream is want


def test_set_value_is_yaml12(tmp_path):
    sc = _load(tmp_path, overrides=["target.server={kind: jax}", "target.url=",
                                    "target.server.args.prefix_cache=on"])
    assert sc.target.server.args == {"prefix_cache": "on"}
    with pytest.raises(ScenarioError, match=r"api.stream: 'on' is a YAML 1.1 boolean; write true"):
        _load(tmp_path, overrides=["api.stream=on"])
    assert _load(tmp_path, overrides=["api.stream=false"]).api.stream is False


def test_no_sexagesimal_no_11_octal_no_timestamps():
    tree = yaml12.load("a: 1:30\nb: 0755\nc: 0o17\nd: 0x1F\ne: 2024-01-01\nf: 1_000\ng: 1e3\n"
                       "h: -.inf\ni: ~\nj: =\n")
    assert tree == {"a": "1:30", "b": 755, "c": 15, "d": 31, "e": "2024-01-01", "f": "1_000",
                    "g": 1000.0, "h": float("-inf"), "i": None, "j": "="}


@pytest.mark.parametrize("s", ["on", "off", "yes", "No", "0o17", "1e3", "1:30", "0755", "2024-01-01",
                               "true", "=", "plain"])
def test_dump_quotes_what_either_schema_would_misread(s):
    import yaml
    text = yaml12.dump({"x": s})
    assert yaml12.load(text) == {"x": s} and yaml.safe_load(text) == {"x": s}


def test_an_alias_bomb_is_still_refused(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, "
              f"*a{i-1}, *a{i-1}, *a{i-1}]" for i in range(1, 9)]
    f = tmp_path / "bomb.yaml"
    f.write_text(BASE + "\n".join(lines) + "\n")
    with pytest.raises(ScenarioError, match="expands to more than"):
        load_scenario(f)


def test_run_dir_readers_read_yaml12(tmp_path):
    from analysis.report.manifest import load_scenario_tree
    (tmp_path / "scenario.yaml").write_text("api: {models: [{name: on}], retry: {on: [429]}}\n")
    assert load_scenario_tree(tmp_path)["api"] == {"models": [{"name": "on"}], "retry": {"on": [429]}}
