"""Multi-turn sessions through the runner: each turn carries the answers the server gave."""
import json

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from tests.loadgen.client.fakes import FakeOpenAI


def scenario(url, tmp_path, conv_path, load, **api):
    return scenario_from_dict({
        "name": "sess", "target": {"url": url},
        "api": {"endpoint": "chat", "session_header": "X-Session-ID", "probe": False, **api},
        "workload": {"source": "sessions", "path": str(conv_path),
                     "think_time_s": {"dist": "fixed", "value": 0.05}},
        "load": load, "output": {"dir": str(tmp_path), "run_name": "run", "report": "text"}})


def conversations(tmp_path):
    conv = [{"conversations": [{"from": "human", "value": "first question"},
                               {"from": "gpt", "value": "x y z"},
                               {"from": "human", "value": "second question"},
                               {"from": "gpt", "value": "x"},
                               {"from": "human", "value": "third"}]}]
    p = tmp_path / "conv.json"
    p.write_text(json.dumps(conv))
    return p


def test_second_turn_carries_the_first_answer_exactly(tmp_path):
    with FakeOpenAI(tokens=4) as srv:
        res = run_scenario(scenario(srv.url, tmp_path, conversations(tmp_path),
                                    {"mode": "concurrency", "concurrency": 1, "num_requests": 3}))
        bodies = [b for b in srv.bodies if b.get("messages")]
    recs = sorted(read_records(res.run_dir / "records.jsonl"), key=lambda r: r["id"])
    assert [(r["turn"], r["status"]) for r in recs] == [(1, "ok"), (2, "ok"), (3, "ok")]
    assert len({r["session_id"] for r in recs}) == 1
    answer = recs[0]["output_text"]
    assert answer == " tok" * 3     # what the fake server streamed: max_tokens 3, the reply "x y z"
    m2 = bodies[1]["messages"]
    assert m2 == [{"role": "user", "content": "first question"},
                  {"role": "assistant", "content": answer},
                  {"role": "user", "content": "second question"}]
    assert len(bodies[2]["messages"]) == 5
    # turn 2 was due at turn 1's end + think time, and sent then
    assert recs[1]["scheduled_at_ns"] - recs[0]["end_at_ns"] == 50_000_000
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert summary["sessions"]["sessions"] == 1 and summary["sessions"]["turns"] == 3
    assert [t["turn"] for t in summary["sessions"]["by_turn"]] == [1, 2, 3]


def test_sessions_in_server_mode_start_at_the_rate_and_count_turns(tmp_path):
    with FakeOpenAI(tokens=2) as srv:
        res = run_scenario(scenario(srv.url, tmp_path, conversations(tmp_path),
                                    {"mode": "server", "rate": 20, "arrival": "constant",
                                     "num_requests": 7}))
    recs = read_records(res.run_dir / "records.jsonl")
    assert len(recs) == 7 and all(r["status"] == "ok" for r in recs)
    firsts = sorted(r["scheduled_at_ns"] for r in recs if r["turn"] == 1)
    assert len(firsts) >= 3                                          # a new session every 50 ms
    assert all(f - firsts[0] == 50_000_000 * i for i, f in enumerate(firsts))
