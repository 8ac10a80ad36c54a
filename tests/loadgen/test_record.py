"""loadgen.record.Record.to_json: one JSON line whose values json.loads gives back exactly."""
import json

from loadgen.record import Record


def full() -> Record:
    r = Record(id=7, phase="measured", scheduled_at_ns=1, sent_at_ns=2, first_chunk_at_ns=3,
               first_token_at_ns=4, end_at_ns=9, chunks=[[3, 0], [4, 1], [5, 2]], status="ok",
               http_status=200, output_tokens=3, error="naïve “quoted” \\ \" \n\t\x01 ☃ 𝄞",
               output_text="x" * 10, target_url="http://127.0.0.1:1")
    return r


def test_the_line_reads_back_to_the_same_values():
    r = full()
    line = r.to_json()
    assert "\n" not in line
    assert json.loads(line) == json.loads(json.dumps(r.__dict__))
    assert list(json.loads(line)) == list(r.__dict__)          # field order kept


def test_a_lone_surrogate_still_makes_a_line():
    r = full()
    r.error = "bad \ud800 text"
    back = json.loads(r.to_json())
    assert back["error"] == "bad \ud800 text" and back["id"] == 7
