"""`loadgen run` with api.endpoint transcriptions against transformers serve's recorded audio
answers (bench/compat/audio.py: a Whisper-shaped random model made locally), replayed byte for
byte: a multipart upload per request; the stream is plain text (``data: W``, no [DONE], no
usage), so each data line is one token and the body's clean end ends the record; the vLLM field
stream_include_usage is refused (422) and dropped by the probe; stream false answers {"text"}."""
import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from tests.support.replay_server import FIXTURES, ReplayServer

pytestmark = pytest.mark.skipif(not (FIXTURES / "transformers" / "transcriptions.json").exists(),
                                reason="no recorded audio transcripts")


def run(url, tmp_path, stream, transport=None, monkeypatch=None):
    if transport:
        monkeypatch.setenv("LOADGEN_HTTP", transport)
    return run_scenario(scenario_from_dict({
        "name": "audio", "target": {"url": url, "scrape_metrics": False},
        "api": {"endpoint": "transcriptions", "stream": stream},
        "workload": {"audio": {"seconds": 1.0, "sample_rate": 16000, "pool": 3}},
        "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 6},
        "output": {"dir": str(tmp_path), "run_name": f"audio-{stream}", "report": "none"}}))


@pytest.mark.parametrize("transport", ["wire", "aiohttp"])
def test_streamed_transcriptions_against_replayed_transformers_serve(tmp_path, transport,
                                                                     monkeypatch):
    with ReplayServer("transformers") as s:
        res = run(s.url, tmp_path, True, transport, monkeypatch)
        log = s.log()
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    assert [r["status"] for r in recs] == ["ok"] * 6, [r["error"] for r in recs]
    for r in recs:
        assert r["output_tokens"] == 16 and r["output_tokens_source"] == "chunks"
        assert r["first_token_at_ns"] and r["finish_reason"] is None
        assert r["input_audio_s"] == 1.0 and r["requested_output_tokens"] is None
    s = res.summary
    assert s["dropped_fields"] == ["stream_include_usage"]
    assert s["audio"]["rtfx"] > 0 and s["audio"]["requests"] == 6
    assert s["ttft_ms"]["count"] == 6
    cases = [c for c, path, _ in log if path == "/v1/audio/transcriptions"]
    assert cases[0] == "transcriptions-stream-loadgen" and set(cases[1:]) == {"transcriptions-stream"}


def test_whole_transcription_against_replayed_transformers_serve(tmp_path):
    with ReplayServer("transformers") as s:
        res = run(s.url, tmp_path, False)
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    assert [r["status"] for r in recs] == ["ok"] * 6, [r["error"] for r in recs]
    assert all(r["output_chars"] == 16 and r["output_tokens"] is None for r in recs)
    assert res.summary["audio"]["rtfx"] > 0 and not res.summary["dropped_fields"]
