"""User files in loadgen/scenario read within bounds and refused in one line (FILE:LINE, exit 2):
a JSONL line longer than MAX_LINE_BYTES before it is read whole, a ShareGPT file over
MAX_JSON_FILE_BYTES before it is read, a lone surrogate in any text a dataset / trace / jsonl /
ShareGPT file puts into a request, and dataset file errors named workload.dataset.path."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.scenario import sessions, trace
from loadgen.scenario.dataset import read_dataset_file
from loadgen.scenario.sessions import read_sharegpt_sessions
from loadgen.scenario.strict import ScenarioError
from loadgen.scenario.trace import bounded_lines, read_trace

ROOT = Path(__file__).resolve().parents[3]
LONE = '"say \\ud800 now"'          # JSON text of a string holding a lone surrogate


def _err(fn, *args) -> str:
    with pytest.raises(ScenarioError) as e:
        fn(*args)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_an_over_long_line_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "MAX_LINE_BYTES", 1 << 20)
    p = tmp_path / "big.jsonl"
    with open(p, "w") as f:
        f.write(json.dumps({"timestamp": 0, "prompt": "a", "max_tokens": 1}) + "\n")
        f.write(json.dumps({"timestamp": 1, "prompt": "x" * (3 << 20), "max_tokens": 1}) + "\n")
    msg = _err(read_trace, p, "jsonl")
    assert msg == f"workload.path: {p}:2: line longer than 1,048,576 bytes (docs/limits.md)"
    d = tmp_path / "set.jsonl"
    with open(d, "w") as f:
        f.write(json.dumps({"prompt": "x" * (3 << 20), "expected": {"exact": "1"}}) + "\n")
    assert _err(read_dataset_file, str(d)).startswith(f"workload.dataset.path: {d}:1: line longer than")


def test_bounded_lines_never_asks_for_more_than_the_bound(monkeypatch):
    monkeypatch.setattr(trace, "MAX_LINE_BYTES", 100)
    asked = []

    class Spy(io.BytesIO):
        def readline(self, limit=-1):
            asked.append(limit)
            return super().readline(limit)

    f = Spy(b"a" * 100 + b"\n" + b"b" * 100 + b"\n" + b"c" * 5000 + b"\n")
    got = []
    with pytest.raises(ScenarioError, match="F:3: line longer than 100 bytes"):
        for no, raw in bounded_lines(f, lambda n: f"F:{n}"):
            got.append(no)
    assert got == [1, 2] and set(asked) == {101}          # exactly the bound, never unbounded


def test_a_sharegpt_file_over_the_bound_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(sessions, "MAX_JSON_FILE_BYTES", 1 << 20)
    p = tmp_path / "c.json"
    p.write_text(json.dumps([{"conversations": [{"from": "human", "value": "x" * (2 << 20)}]}]))
    msg = _err(read_sharegpt_sessions, p)
    assert msg.startswith(f"workload.path: {p}: ") and "more than 1,048,576" in msg


@pytest.mark.parametrize("line,field", [
    ('{"prompt": %s, "expected": {"exact": "1"}}' % LONE, "prompt"),
    ('{"messages": [{"role": "user", "content": %s}], "expected": {"exact": "1"}}' % LONE,
     "messages[0].content"),
    ('{"messages": [{"role": "user", "content": [{"type": "text", "text": %s}]}], '
     '"expected": {"exact": "1"}}' % LONE, "messages[0].content[0].text"),
])
def test_a_lone_surrogate_in_a_dataset_row_is_refused_naming_file_line_and_field(
        tmp_path, line, field):
    p = tmp_path / "set.jsonl"
    p.write_text('{"prompt": "ok", "expected": {"exact": "1"}}\n' + line + "\n")
    msg = _err(read_dataset_file, str(p))
    assert msg.startswith(f"workload.dataset.path: {p}:2: {field}: not valid Unicode")


def test_a_paired_surrogate_escape_is_fine(tmp_path):
    p = tmp_path / "set.jsonl"
    p.write_text('{"prompt": "smile \\ud83d\\ude00", "expected": {"exact": "1"}}\n')
    assert read_dataset_file(str(p))[0].prompt == "smile \U0001F600"


def test_a_lone_surrogate_in_a_trace_or_sharegpt_file_is_refused(tmp_path):
    t = tmp_path / "t.jsonl"
    t.write_text('{"timestamp": 0, "prompt": %s}\n' % LONE)
    assert _err(read_trace, t, "jsonl").startswith(f"workload.path: {t}:1: prompt: not valid")
    s = tmp_path / "c.json"
    s.write_text('[\n{"conversations": [{"from": "human", "value": %s}]}]' % LONE)
    assert _err(read_sharegpt_sessions, s).startswith(
        f"workload.path: {s}:2: conversations[0].value: not valid Unicode")


def test_dataset_file_errors_name_workload_dataset_path(tmp_path):
    p = tmp_path / "set.jsonl"
    p.write_bytes(b'{"prompt": "ok", "expected": {"exact": "1"}}\nnot json\n')
    assert _err(read_dataset_file, str(p)).startswith(f"workload.dataset.path: {p}:2: not valid JSON")
    p.write_bytes(b'\xff\n')
    assert _err(read_dataset_file, str(p)).startswith(f"workload.dataset.path: {p}:1: not valid UTF-8")


def test_the_cli_refuses_a_lone_surrogate_with_one_line_and_exit_2(tmp_path):
    p = tmp_path / "set.jsonl"
    p.write_text('{"prompt": %s, "expected": {"exact": "1"}}\n' % LONE)
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "run", "scenarios/accuracy.yaml",
                        "--set", "target.url=http://127.0.0.1:9",
                        "--set", f"workload.dataset={{path: {p}}}",
                        "--set", f"output.dir={tmp_path}", "--set", "output.run_name=r"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert f"{p}:1: prompt: not valid Unicode" in r.stderr
    assert not (tmp_path / "r").exists()            # refused before a run directory exists


def test_a_tokenizer_file_over_the_bound_is_refused_unread(tmp_path, monkeypatch):
    from loadgen.scenario import tokens
    monkeypatch.setattr(tokens, "MAX_TOKENIZER_BYTES", 1 << 20)
    p = tmp_path / "tokenizer.json"
    p.write_bytes(b" " * (2 << 20))
    msg = _err(tokens.TokenizerCounter, str(p))
    assert msg.startswith(f"workload.tokenizer: {p}: 2,097,152 bytes, more than 1,048,576")
