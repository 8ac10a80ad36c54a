"""`loadgen run` against the recorded real servers (vLLM 0.32 CPU, llama.cpp's llama-server,
transformers serve), replayed byte for byte by tests/support/replay_server.py: every quirk of
tests/fixtures/servers/ in seconds, without installing the servers.

Quirks covered: llama-server closes the socket after every streamed answer (stale keep-alive ─►
one retry, then no reuse); transformers serve answers 422 to ignore_eos (dropped with a warning),
never sends [DONE] and puts usage on the finish chunk; chat role chunks with content "" / null /
absent; versions from /version (vLLM), /props (llama.cpp) or none (transformers).
"""
import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from tests.support.replay_server import ReplayServer, servers

SERVERS = servers()
pytestmark = pytest.mark.skipif(not SERVERS, reason="no recorded transcripts")
VERSION = {"vllm": ("0.32.0", "GET /version"), "llama.cpp": ("b1-0c1e570", "GET /props build_info"),
           "transformers": (None, None)}


def run(url, tmp_path, endpoint, name):
    return run_scenario(scenario_from_dict({
        "name": name, "target": {"url": url, "scrape_metrics": False},
        "api": {"endpoint": endpoint, "stream": True, "ignore_eos": True, "include_usage": True},
        "workload": {"prompt_tokens": {"dist": "fixed", "value": 16},
                     "output_tokens": {"dist": "fixed", "value": 8}},
        "load": {"mode": "concurrency", "concurrency": 4, "num_requests": 12},
        "output": {"dir": str(tmp_path), "run_name": name, "report": "none"}}))


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
@pytest.mark.parametrize("server", SERVERS)
def test_every_request_succeeds_against_the_replayed_server(server, endpoint, tmp_path):
    with ReplayServer(server) as s:
        res = run(s.url, tmp_path, endpoint, f"{server}-{endpoint}")
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    assert len(recs) == 12 and [r["status"] for r in recs] == ["ok"] * 12, \
        {r["error_kind"]: r["error"] for r in recs if r["status"] != "ok"}
    assert all(r["output_tokens"] == 8 and r["first_token_at_ns"] for r in recs)
    s = res.summary
    assert s["requests_failed"] == 0
    if server == "transformers":           # 422 Unexpected fields {'ignore_eos'}: dropped
        assert s["dropped_fields"] == ["ignore_eos"] and s["warnings"]
    else:
        assert not s.get("dropped_fields")
    if server == "llama.cpp":              # closes after every stream: the stale socket was met,
        cc, tr = res.meta["client_connections"], res.meta["client_transport"]   # or (wire) its
        assert cc["stale_connection_retries"] >= 1 or cc["reuse_connections"] is False \
            or tr.get("connections_opened", 0) >= 12                          # FIN seen while idle
    import json
    sut = json.loads((res.run_dir / "sut.json").read_text())
    version, source = VERSION[server]
    assert sut["server_version"].get("version") == version
    assert sut["server_version"].get("source") == source
    if version is None:
        assert "offers no version" in sut["server_version"]["reason"]
