"""loadgen.scenario.sessions: every ShareGPT turn, synthetic sessions, think time, output lengths."""
import json

import numpy as np
import pytest

from loadgen.scenario.model import ScenarioError, Seconds, Workload

from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.sessions import draw_seconds, read_sharegpt_sessions
from loadgen.scenario.workload import build_workload

CONVS = [{"conversations": [{"from": "human", "value": "one two three"},
                            {"from": "gpt", "value": "a b c d e"},
                            {"from": "human", "value": "four five"},
                            {"from": "gpt", "value": "f g"},
                            {"from": "human", "value": "six"}]},
         {"conversations": [{"from": "gpt", "value": "hello"}]},
         {"conversations": [{"from": "human", "value": "seven eight"},
                            {"from": "gpt", "value": "h"}]}]


def write(tmp_path, data):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(data))
    return p


def test_every_human_turn_with_its_reply(tmp_path):
    convs = read_sharegpt_sessions(write(tmp_path, CONVS))
    assert convs == [[("one two three", "a b c d e"), ("four five", "f g"), ("six", None)],
                     [("seven eight", "h")]]
    with pytest.raises(ScenarioError, match="no conversation with a human turn"):
        read_sharegpt_sessions(write(tmp_path, [CONVS[1]]))


def test_sharegpt_sessions_take_the_assistant_lengths_unless_output_tokens_given(tmp_path):
    w = Workload(source="sessions", path=str(write(tmp_path, CONVS)),
                 think_time_s={"dist": "fixed", "value": 0.5},
                 output_tokens={"dist": "fixed", "value": 9})
    plan = build_workload(Workload(source="sessions", path=str(write(tmp_path, CONVS)),
                                   think_time_s={"dist": "fixed", "value": 0.5}))
    s1, s2, s3 = [s for _, s in zip(range(3), plan.sessions)]
    assert [t.user for t in s1.turns] == ["one two three", "four five", "six"]
    assert [t.max_tokens for t in s1.turns][:2] == [5, 2]       # the gpt replies' word counts
    assert s1.turns[2].max_tokens == 128                          # no reply: output_tokens default
    assert [t.think_s for t in s1.turns] == [0.0, 0.5, 0.5]
    assert s3.turns == s1.turns and s3.id != s1.id                # the file cycles, new ids
    assert [t.user for t in s2.turns] == ["seven eight"]
    given = build_workload(w)
    assert [t.max_tokens for t in next(iter(given.sessions)).turns] == [9, 9, 9]


def test_synthetic_sessions_are_seeded():
    w = Workload(source="sessions", tokenizer="words", turns={"dist": "uniform", "min": 2, "max": 4},
                 prompt_tokens={"dist": "fixed", "value": 6}, output_tokens={"dist": "fixed", "value": 3})
    a = [s for _, s in zip(range(5), build_workload(w).sessions)]
    b = [s for _, s in zip(range(5), build_workload(w).sessions)]
    assert a == b and all(2 <= len(s.turns) <= 4 for s in a)
    assert all(t.user_tokens == 6 and t.max_tokens == 3 for s in a for t in s.turns)
    assert len({s.turns[0].user for s in a}) == 5


def test_think_time_distributions():
    rng = np.random.default_rng(0)
    assert draw_seconds(Seconds(dist="fixed", value=0.25), rng) == 0.25
    u = [draw_seconds(Seconds(dist="uniform", min=1, max=2), rng) for _ in range(200)]
    assert 1 <= min(u) and max(u) <= 2
    e = [draw_seconds(Seconds(dist="exponential", mean=0.5), rng) for _ in range(4000)]
    assert abs(sum(e) / len(e) - 0.5) < 0.05
    with pytest.raises(ValueError, match="needs 'mean'"):
        Seconds(dist="exponential")


@pytest.mark.parametrize("api,load,msg", [
    ({"endpoint": "completions"}, {"mode": "concurrency", "concurrency": 2, "num_requests": 4},
     "needs api.endpoint chat"),
    ({"endpoint": "chat"}, {"mode": "offline", "num_requests": 4}, "load.mode concurrency"),
])
def test_sessions_need_chat_and_a_session_mode(api, load, msg):
    with pytest.raises(ScenarioError, match=msg):
        scenario_from_dict({"name": "s", "target": {"url": "http://127.0.0.1:1"}, "api": api,
                            "workload": {"source": "sessions"}, "load": load})
