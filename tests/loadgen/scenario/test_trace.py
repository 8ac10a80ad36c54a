"""loadgen.scenario.trace: trace rows, replay offsets and block-shared prompts, on hand-made files."""
import json

import numpy as np
import pytest

from loadgen.scenario.strict import ScenarioError
from loadgen.scenario.trace import TracePrompts, TraceRow, read_trace, trace_offsets_ns
from loadgen.scenario.tokens import ByteCounter, WordCounter


def write(tmp_path, rows, name="t.jsonl"):
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return p


MOON = [{"timestamp": 0, "input_length": 10, "output_length": 4, "hash_ids": [1, 2, 3]},
        {"timestamp": 250, "input_length": 9, "output_length": 5, "hash_ids": [1, 2, 7]},
        {"timestamp": 100, "input_length": 6, "output_length": 3, "hash_ids": [9, 2]}]


def test_rows_come_back_in_time_order(tmp_path):
    rows = read_trace(write(tmp_path, MOON), "mooncake")
    assert [r.timestamp_ms for r in rows] == [0, 100, 250]
    assert rows[2] == TraceRow(250.0, 5, 9, (1, 2, 7))


@pytest.mark.parametrize("bad,msg", [
    ("{nope", ":2: not valid JSON"),
    ({"timestamp": -1, "input_length": 3, "output_length": 1}, ":2: timestamp: needs a finite number of ms from 0"),
    ({"timestamp": 1, "input_length": 3, "output_length": 0}, ":2: output_length: must be an integer from 1 to 1,048,576 tokens"),
    ({"timestamp": 1, "input_length": 3, "output_length": 2, "hash_ids": ["a"]}, ":2: hash_ids: must be a list of non-negative integers"),
])
def test_bad_rows_name_the_line(tmp_path, bad, msg):
    with pytest.raises(ScenarioError, match=msg):
        read_trace(write(tmp_path, [MOON[0], bad]), "mooncake")


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(ScenarioError, match="no such file"):
        read_trace(tmp_path / "none.jsonl", "mooncake")
    with pytest.raises(ScenarioError, match="no requests"):
        read_trace(write(tmp_path, ["", " "]), "mooncake")


def test_offsets_follow_the_trace_scaled_and_bounded(tmp_path):
    rows = read_trace(write(tmp_path, MOON), "mooncake")
    assert trace_offsets_ns(rows).tolist() == [0, 100_000_000, 250_000_000]
    assert trace_offsets_ns(rows, 0.5).tolist() == [0, 50_000_000, 125_000_000]
    assert trace_offsets_ns(rows, 2.0, n=2).tolist() == [0, 200_000_000]
    assert trace_offsets_ns(rows, 1.0, duration_s=0.2).tolist() == [0, 100_000_000]
    late = [TraceRow(5000.0, 1, 1), TraceRow(5010.5, 1, 1)]
    assert trace_offsets_ns(late).tolist() == [0, 10_500_000]


@pytest.mark.parametrize("counter", [WordCounter(), ByteCounter()], ids=["words", "bytes"])
def test_equal_leading_hash_ids_give_identical_leading_text(counter):
    tp = TracePrompts(counter, seed=3, block_tokens=4)
    a, na = tp.prompt(TraceRow(0, 1, 12, (1, 2, 3)), 0)
    b, nb = tp.prompt(TraceRow(0, 1, 11, (1, 2, 7)), 1)
    c, _ = tp.prompt(TraceRow(0, 1, 8, (5, 2)), 2)
    assert (na, nb) == (12, 11) and tp.describe()["rows_length_mismatch"] == 0
    shared = counter.join([tp.block(1), tp.block(2)])
    assert a.startswith(shared) and b.startswith(shared)
    assert a[len(shared):] != b[len(shared):]          # block 3 vs block 7
    assert not c.startswith(tp.block(1))               # a different first block
    assert tp.block(2) in c                            # but the same second block text
    again, _ = TracePrompts(counter, seed=3, block_tokens=4).prompt(TraceRow(0, 1, 12, (1, 2, 3)), 0)
    assert again == a                                  # seeded: the same text on every run


def test_ids_short_of_the_length_are_padded_with_unique_text():
    tp = TracePrompts(WordCounter(), seed=0, block_tokens=4)
    a, n = tp.prompt(TraceRow(0, 1, 10, (1,)), 0)
    b, _ = tp.prompt(TraceRow(0, 1, 10, (1,)), 1)
    assert n == 10 and a.split()[:4] == b.split()[:4] and a != b


def test_generic_jsonl_rows(tmp_path):
    rows = read_trace(write(tmp_path, [
        {"timestamp": 5, "prompt": "hello there", "max_tokens": 7},
        {"timestamp": 9, "messages": [{"role": "user", "content": "hi you"}]}]), "jsonl")
    assert (rows[0].prompt, rows[0].output_length) == ("hello there", 7)
    assert rows[1].messages[0]["content"] == "hi you" and rows[1].output_length is None
    tp = TracePrompts(WordCounter(), 0, 512)
    assert tp.prompt(rows[0], 0) == ("hello there", 2)
    assert tp.prompt(rows[1], 1) == ("hi you", 2)
    with pytest.raises(ScenarioError, match=":1: needs a string 'prompt' or a list 'messages'"):
        read_trace(write(tmp_path, [{"timestamp": 1, "max_tokens": 3}], "b.jsonl"), "jsonl")


def test_offsets_are_int64_and_start_at_zero(tmp_path):
    off = trace_offsets_ns(read_trace(write(tmp_path, MOON), "mooncake"))
    assert off.dtype == np.int64 and off[0] == 0 and np.all(np.diff(off) >= 0)


def test_prefix_groups_follow_zipf_popularity():
    from loadgen.scenario.model import Workload
    from loadgen.scenario.workload import build_workload
    w = Workload(tokenizer="words", prompt_tokens={"dist": "fixed", "value": 5},
                 prefix={"groups": 3, "tokens": 6, "popularity": "zipf", "zipf_s": 1.5})
    plan = build_workload(w)
    specs = plan.take(600)
    counts = [sum(s.prompt.startswith(g + " ") for s in specs) for g in plan.groups]
    assert sum(counts) == 600 and all(s.prompt_tokens == 11 for s in specs)
    p = plan.group_p                                   # 1, 2^-1.5, 3^-1.5, normalised
    assert p == pytest.approx(np.array([1, 2 ** -1.5, 3 ** -1.5]) / (1 + 2 ** -1.5 + 3 ** -1.5))
    for c, q in zip(counts, p):
        assert abs(c / 600 - q) < 0.06
    assert plan.describe()["prefix"]["groups"] == 3
    with pytest.raises(Exception, match="not both"):
        Workload(prefix={"groups": 2, "tokens": 4}, shared_prefix_tokens=3)
