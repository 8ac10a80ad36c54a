"""analysis.metrics.turns and .repeats on hand-built records and summaries."""
import pytest

from analysis.metrics.repeats import interval, repeat_summary
from analysis.metrics.turns import by_turn, reasoning_block, sessions_block, ttft_answer_ms
from tests.analysis.synth import MS, rec


def turn_rec(i, session, turn, ttft):
    return rec(i, sched=0, sent=0, chunks=[[ttft, 1], [ttft + 10, 1], [ttft + 20, 1]],
               session_id=session, turn=turn, prompt=10 * turn)


def test_by_turn_groups_completed_records_by_turn_index():
    recs = [turn_rec(0, "a", 1, 20), turn_rec(1, "a", 2, 40), turn_rec(2, "b", 1, 30),
            turn_rec(3, "b", 2, 60), rec(4, status="error", session_id="b", turn=3)]
    t1, t2 = by_turn(recs)
    assert (t1["turn"], t1["requests"], t2["requests"]) == (1, 2, 2)
    assert t1["ttft_ms"]["p50"] == pytest.approx(25.0) and t2["ttft_ms"]["p50"] == pytest.approx(50.0)
    assert t1["tpot_ms"]["p50"] == pytest.approx(10.0) and t2["prompt_tokens_mean"] == 20
    s = sessions_block(recs)
    assert (s["sessions"], s["turns"], s["turns_per_session_max"]) == (2, 5, 3)
    assert by_turn([rec(0, chunks=[[5, 1]])]) is None and sessions_block([rec(0)]) is None


def test_reasoning_gives_time_to_first_answer_beside_ttft():
    r = rec(0, sent=0, chunks=[[10, 1], [20, 1], [30, 1], [40, 1]], first_answer_at_ns=30 * MS,
            reasoning_tokens=2)
    plain = rec(1, sent=0, chunks=[[10, 1]])
    assert ttft_answer_ms(r) == pytest.approx(30.0) and ttft_answer_ms(plain) is None
    b = reasoning_block([r, plain])
    assert b["ttft_answer_ms"]["count"] == 1 and b["ttft_answer_ms"]["p50"] == pytest.approx(30.0)
    assert (b["reasoning_tokens"], b["answer_tokens"], b["requests_with_reasoning"]) == (2, 3, 1)
    assert reasoning_block([plain]) is None


def test_interval_is_students_t():
    iv = interval([10.0, 12.0, 14.0])     # mean 12, s = 2, t(0.975, 2) = 4.302653
    assert iv["mean"] == 12 and iv["std"] == pytest.approx(2.0)
    assert iv["ci95_low"] == pytest.approx(12 - 4.302653 * 2 / 3 ** 0.5, rel=1e-6)
    assert iv["ci95_high"] == pytest.approx(12 + 4.302653 * 2 / 3 ** 0.5, rel=1e-6)
    one = interval([5.0])
    assert one["mean"] == 5 and one["ci95_low"] is None and interval([])["mean"] is None


def test_repeat_summary_skips_missing_figures():
    s = [{"request_throughput": 2.0, "tpot_ms": {"p50": 10.0}, "verdict": {"valid": True}},
         {"request_throughput": 4.0, "tpot_ms": {"p50": None}, "verdict": {"valid": False}}]
    out = repeat_summary(s)
    assert out["runs"] == 2 and out["verdicts"] == [True, False]
    assert out["figures"]["request_throughput"]["mean"] == 3.0
    assert out["figures"]["tpot_ms_p50"]["n"] == 1 and out["figures"]["goodput"]["n"] == 0
