"""workload.dataset (loadgen.scenario.dataset): rows with expected answers, the seeded builtin
arithmetic set, and the bad inputs that are one line and exit 2 (a row without ``expected``
names FILE:LINE); the scenario's cost block and target.accelerators refuse 0 and below."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.scenario.dataset import Expected, arithmetic, read_dataset_file
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.strict import ScenarioError
from loadgen.scenario.workload import build_workload

ROOT = Path(__file__).resolve().parents[3]


def tree(**workload) -> dict:
    return {"target": {"url": "http://127.0.0.1:9"}, "api": {"endpoint": "chat"},
            "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 4},
            "workload": workload}


def test_builtin_arithmetic_is_seeded_and_each_answer_is_the_exact_result():
    a, b = arithmetic(0, 50), arithmetic(0, 50)
    assert a == b and arithmetic(1, 50) != a
    for it in a:
        x, op, y = it.prompt.split("?")[0].removeprefix("What is ").split()
        assert it.expected == Expected("exact", str(int(x) + int(y) if op == "+" else int(x) * int(y)))
    assert {it.prompt.split()[3] for it in a} == {"+", "*"}


def test_the_plan_carries_each_prompt_with_its_expected_answer_and_cycles():
    sc = scenario_from_dict(tree(dataset={"builtin": "arithmetic", "seed": 3, "size": 5},
                                 output_tokens={"dist": "fixed", "value": 7}))
    assert sc.api.ignore_eos is False              # an answer ends when complete
    specs = build_workload(sc.workload).take(7)
    items = arithmetic(3, 5)
    assert [s.prompt for s in specs] == [it.prompt for it in items + items[:2]]
    assert [s.expected for s in specs] == [it.expected for it in items + items[:2]]
    assert {s.max_tokens for s in specs} == {7}


def test_a_file_reads_prompt_or_messages_with_exact_regex_or_choices(tmp_path):
    p = tmp_path / "set.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "2+2?", "expected": {"exact": "4"}, "max_tokens": 3},
        {"messages": [{"role": "user", "content": "capital of France?"}],
         "expected": {"regex": "(?i)paris"}},
        {"prompt": "yes or no?", "expected": {"choices": ["yes", "no"]}}]) + "\n")
    rows = read_dataset_file(str(p))
    assert [r.expected.kind for r in rows] == ["exact", "regex", "choices"]
    assert rows[0].max_tokens == 3 and rows[1].messages[0]["role"] == "user"
    assert rows[2].expected.value == ("yes", "no")


@pytest.mark.parametrize("row,needle", [
    ({"prompt": "x"}, "set.jsonl:2: expected: missing"),
    ({"prompt": "x", "expected": {"exact": "1", "regex": "1"}}, "set.jsonl:2: expected: must be"),
    ({"prompt": "x", "expected": {"regex": "("}}, "set.jsonl:2: expected.regex: not a valid"),
    ({"prompt": "x", "expected": {"choices": []}}, "set.jsonl:2: expected.choices: must be"),
    ({"expected": {"exact": "1"}}, "set.jsonl:2: give exactly one of 'prompt'"),
])
def test_a_bad_row_is_one_error_naming_file_and_line(tmp_path, row, needle):
    p = tmp_path / "set.jsonl"
    p.write_text(json.dumps({"prompt": "ok", "expected": {"exact": "1"}}) + "\n"
                 + json.dumps(row) + "\n")
    with pytest.raises(ScenarioError) as e:
        read_dataset_file(str(p))
    assert needle in str(e.value) and "\n" not in str(e.value)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "loadgen.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("sets,needle", [
    (["cost.usd_per_hour=-1"], "cost.usd_per_hour: Input should be greater than 0"),
    (["cost.usd_per_kwh=0"], "cost.usd_per_kwh: Input should be greater than 0"),
    (["cost={}"], "cost: give usd_per_hour (per accelerator) and/or usd_per_kwh"),
    (["target.accelerators=0"], "target.accelerators: Input should be greater than or equal to 1"),
    (["workload.dataset={builtin: arithmetic, path: x.jsonl}"], "workload.dataset: "
                                                               "give exactly one of 'path'"),
    (["api.endpoint=embeddings", "api.stream=false", "slo.ttft_ms=null", "slo.tpot_ms=null"],
     "workload.dataset: answers are checked on generation endpoints"),
])
def test_bad_cost_accelerators_and_dataset_keys_are_one_line_and_exit_2(sets, needle):
    r = cli("run", ROOT / "scenarios/accuracy.yaml", *[x for s in sets for x in ("--set", s)])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert needle in line, line


def test_a_dataset_row_without_expected_exits_2_naming_file_and_line(tmp_path):
    p = tmp_path / "qa.jsonl"
    p.write_text('{"prompt": "1+1?", "expected": {"exact": "2"}}\n{"prompt": "2+2?"}\n')
    r = cli("run", ROOT / "scenarios/accuracy.yaml", "--set",
            f"workload.dataset={{path: {p}}}", "--set", f"output.dir={tmp_path}")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert f"{p}:2: expected: missing" in line


def test_messages_rows_on_the_completions_endpoint_exit_2(tmp_path):
    p = tmp_path / "chat.jsonl"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "1+1?"}],
                             "expected": {"exact": "2"}}) + "\n")
    r = cli("run", ROOT / "scenarios/accuracy.yaml", "--set", f"workload.dataset={{path: {p}}}",
            "--set", "api.endpoint=completions", "--set", f"output.dir={tmp_path}")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "rows with 'messages' need api.endpoint chat or responses" in line
