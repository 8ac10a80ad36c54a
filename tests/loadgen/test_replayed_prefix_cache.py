"""cached_tokens against the recorded real servers (tests/fixtures/servers, replayed byte for byte):
llama.cpp's llama-server sends usage.prompt_tokens_details.cached_tokens in its usage chunk (its
prompt cache: 20 of 21 prompt tokens on a repeat), vLLM 0.32 without --enable-prompt-tokens-details
sends ``"prompt_tokens_details": null`` (the record's cached_tokens is None, and summary.json's
prefix_cache figures are null with the reason), transformers serve sends nothing."""
import pytest

from loadgen.record import read_records
from tests.loadgen.test_replayed_servers import SERVERS, run
from tests.support.replay_server import ReplayServer


@pytest.mark.parametrize("transport", ["wire", "aiohttp"])
@pytest.mark.parametrize("server", [s for s in ("llama.cpp", "vllm") if s in SERVERS])
def test_cached_tokens_from_the_recorded_usage_chunk(server, transport, tmp_path, monkeypatch):
    if transport == "aiohttp":
        monkeypatch.setenv("LOADGEN_HTTP", "aiohttp")
    with ReplayServer(server) as s:
        res = run(s.url, tmp_path, "completions", f"{server}-prefix")
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    assert [r["status"] for r in recs] == ["ok"] * len(recs)
    assert res.meta["client_transport"]["transport"] == transport, res.meta["client_transport"]
    pc = res.summary["prefix_cache"]
    if server == "llama.cpp":
        cached = {r["cached_tokens"] for r in recs}
        assert None not in cached and max(cached) > 0
        assert all(0 <= r["cached_tokens"] <= r["prompt_tokens"] for r in recs)
        assert pc["requests_hit"] >= 1 and pc["cached_prompt_fraction"] > 0
        assert pc["ttft_ms_p50_hit"] is not None
    else:
        assert all(r["cached_tokens"] is None for r in recs)
        assert pc["cached_prompt_fraction"] is None and pc["requests_unreported"] == len(recs)
        assert "--enable-prompt-tokens-details" in pc["reasons"]["cached_prompt_fraction"]
    assert pc["server_hit_rate"] is None and pc["reasons"]["server_hit_rate"]   # not scraped
