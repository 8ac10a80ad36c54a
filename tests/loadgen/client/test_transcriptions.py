"""api.endpoint transcriptions, the pure parts: the tally over the three stream shapes (OpenAI's
typed events, vLLM's chat-like chunks, transformers serve's plain text), a whole answer, the
multipart body (made once per clip, parsed back by the calibration server's bounded parser)."""
import json
from types import SimpleNamespace

import pytest

from loadgen.client import multipart
from loadgen.client.request import Shape, apply_body, end_stream, finish
from loadgen.client.stream_step import StreamStep
from loadgen.client.transcriptions import TranscriptionTally
from loadgen.record import Record
from loadgen.scenario.audio import Clip, probe_clip
from loadgen.scenario.loader import scenario_from_dict
from servers.calib.audio import BadForm, parse_multipart, wav_info


def ev(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def streamed(body: bytes, **kw) -> Record:
    rec = Record(id=1, phase="measured", sent_at_ns=0)
    tally = TranscriptionTally(**kw)
    step = StreamStep(rec, tally)
    for i in range(0, len(body), 7):          # split anywhere: the parser is incremental
        step.feed(1000 + i, body[i:i + 7])
    step.end(10_000)
    finish(rec, tally, None)
    return rec


def test_openai_typed_events_count_one_token_per_delta_and_take_usage_from_done():
    body = (ev({"type": "transcript.text.delta", "delta": " hello"})
            + ev({"type": "transcript.text.delta", "delta": ""})
            + ev({"type": "transcript.text.delta", "delta": " world"})
            + ev({"type": "transcript.text.done", "text": " hello world",
                  "usage": {"type": "tokens", "input_tokens": 50, "output_tokens": 2}}))
    rec = streamed(body)
    assert rec.status == "ok" and rec.finish_reason == "stop"
    assert rec.chunk_output_tokens == 2 and rec.output_tokens == 2
    assert rec.output_tokens_source == "usage" and rec.prompt_tokens == 50
    assert rec.output_chars == len(" hello world")


def test_vllm_chunks_and_done():
    chunk = {"object": "transcription.chunk", "choices": [{"delta": {"content": " a"}}]}
    last = {"object": "transcription.chunk",
            "choices": [{"delta": {"content": " b"}, "finish_reason": "stop"}]}
    usage = {"object": "transcription.chunk", "choices": [],
             "usage": {"prompt_tokens": 7, "completion_tokens": 2}}
    rec = streamed(ev(chunk) + ev(last) + ev(usage) + b"data: [DONE]\n\n")
    assert rec.status == "ok" and rec.finish_reason == "stop"
    assert rec.output_tokens == 2 and rec.prompt_tokens == 7 and rec.token_count_mismatch is False


def test_plain_text_stream_ends_with_the_body_and_says_no_finish_reason():
    rec = streamed(b"data: W\n\ndata: {x\n\ndata: 42\n\ndata: W\n\n")
    assert rec.status == "ok" and rec.finish_reason is None
    assert rec.output_tokens == 4 and rec.output_tokens_source == "chunks"
    assert rec.first_token_at_ns == rec.chunks[0][0]


def test_an_empty_stream_is_incomplete():
    rec = streamed(b"")
    assert rec.status == "error" and rec.error_kind == "incomplete"


def test_plain_text_after_json_events_is_a_protocol_error():
    rec = streamed(ev({"type": "transcript.text.delta", "delta": "a"}) + b"data: W\n\n")
    assert rec.status == "error" and rec.error_kind == "protocol"


def test_error_objects_fail_the_record():
    rec = streamed(ev({"type": "transcript.text.delta", "delta": "a"})
                   + ev({"error": {"message": "boom"}}))
    assert rec.error_kind == "server_error" and "boom" in rec.error
    rec = streamed(ev({"type": "error", "error": {"message": "bad audio"}}))
    assert rec.error_kind == "server_error" and "bad audio" in rec.error


def test_a_typed_stream_without_done_is_incomplete():
    rec = streamed(ev({"type": "transcript.text.delta", "delta": "a"}))
    assert rec.error_kind == "incomplete"


def test_whole_answer_text_and_usage():
    rec = Record(id=1, phase="measured", sent_at_ns=0)
    t = TranscriptionTally(want_text=True)
    apply_body(rec, t, b'{"text": "hello", "usage": {"type": "tokens", "input_tokens": 9, '
                       b'"output_tokens": 3}}', 5)
    finish(rec, t, None)
    assert rec.status == "ok" and rec.output_chars == 5 and rec.output_text == "hello"
    assert rec.output_tokens == 3 and rec.prompt_tokens == 9
    rec = Record(id=2, phase="measured", sent_at_ns=0)
    t = TranscriptionTally()
    apply_body(rec, t, b'{"text": "hi", "usage": {"type": "duration", "seconds": 1}}', 5)
    finish(rec, t, None)
    assert rec.status == "ok" and rec.output_tokens is None      # a duration says no tokens


def shape(**api):
    sc = scenario_from_dict({"target": {"url": "http://x"},
                             "api": {"endpoint": "transcriptions", **api},
                             "workload": {"audio": {"seconds": 0.5, "pool": 2}},
                             "load": {"mode": "concurrency", "concurrency": 1,
                                      "num_requests": 2}})
    return Shape(sc.api, "m", None)


def test_the_body_is_made_once_per_clip_and_parses_back():
    sh = shape(extra_body={"language": "en", "calib": {"format": "vllm"}})
    clip = probe_clip()
    b = sh.body("", None, None, None, clip)
    assert sh.body("", None, None, None, clip) is b            # cached: the same bytes object
    ct = sh.headers["Content-Type"]
    fields, file = parse_multipart(b, ct)
    assert fields == {"model": "m", "stream": "true", "response_format": "json",
                      "stream_include_usage": "true", "language": "en",
                      "calib": '{"format":"vllm"}'}
    assert file == clip.data and wav_info(file)["seconds"] == 1.0
    rec = Record(id=1, phase="measured", requested_output_tokens=64)
    sh.prepare(rec, "", None, clip)
    assert rec.input_audio_s == 1.0 and rec.requested_output_tokens is None


def test_no_clip_is_a_client_error_and_dropped_fields_leave_the_form():
    sh = shape(stream=False)
    with pytest.raises(ValueError, match="workload.audio"):
        sh.body("", None)
    api = SimpleNamespace(stream=True, include_usage=True, continuous_usage=True, extra_body={})
    fields = multipart.form_fields(api, "m", ["stream_include_usage"])
    assert "stream_include_usage" not in fields and fields["stream_continuous_usage_stats"]


def test_a_boundary_inside_the_clip_is_refused():
    with pytest.raises(ValueError, match="boundary"):
        multipart.encode({"model": "m"}, Clip(0, b"RIFF--b--\r\n", 0.1), "b")


@pytest.mark.parametrize("body,ct,why", [
    (b"--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n", "multipart/form-data; boundary=b", "closing"),
    (b"x", "application/json", "expected multipart"),
    (b"--b\r\n\r\n1\r\n--b--\r\n", "multipart/form-data; boundary=b", "without headers"),
    (b"".join(b"--b\r\nContent-Disposition: form-data; name=\"f%d\"\r\n\r\n1\r\n" % i
              for i in range(70)) + b"--b--\r\n", "multipart/form-data; boundary=b", "more than 64"),
    (b"--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n" + b"a" * 70000 + b"\r\n--b--\r\n",
     "multipart/form-data; boundary=b", "over 65536"),
    (b"--b\r\nContent-Type: text/plain\r\n\r\n1\r\n--b--\r\n", "multipart/form-data; boundary=b", "name="),
])
def test_the_calibration_parser_is_bounded(body, ct, why):
    with pytest.raises(BadForm, match=why):
        parse_multipart(body, ct)


# Issue #41 item 22: the bytes chat marks ``protocol`` are protocol here too.
@pytest.mark.parametrize("body", [
    b"data: hello \xff\xfe\xc3( world\n\n",                              # plain text, not UTF-8
    b'data: {"type": "transcript.text.delta", "delta": " \xff\xfe"}\n\n',  # JSON, not UTF-8
    ev({"type": "transcript.text.delta", "delta": " a"}) + b"data: \xc3(\n\n",
])
def test_a_transcription_stream_that_is_not_utf8_is_protocol(body):
    rec = streamed(body)
    assert rec.status == "error" and rec.error_kind == "protocol"


def test_a_json_finish_event_after_plain_text_is_protocol_not_a_token():
    body = (b"data: hello\n\ndata: world\n\n"
            + ev({"type": "transcript.text.done", "text": "hello world"}))
    rec = streamed(body)
    assert rec.status == "error" and rec.error_kind == "protocol"
    assert "JSON event in a plain-text stream" in rec.error
