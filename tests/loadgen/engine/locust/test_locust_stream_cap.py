"""The per-request stamp cap (api.limits.max_chunk_stamps) on the Locust engine (gevent users,
the gevent wire driver) against the session's calibration server: the kept stamps stop at the
cap, the chunks past it are counted, every token is in the counts, and the summary says ITL used
the kept stamps. The asyncio twin: tests/loadgen/client/test_stream_cap.py. No timing asserts."""
from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("locust") is None:
    pytest.skip("locust is not installed", allow_module_level=True)

from tests.loadgen.engine.locust.test_locust_hangups import _run


def test_a_stream_past_the_cap_keeps_the_cap_and_counts_the_rest(tmp_path, calib_server):
    sc, recs, summary = _run(tmp_path, calib_server.url, {
        "mode": "concurrency", "concurrency": 2, "num_requests": 2},
        {"ttft_ms": 0, "itl_ms": 0}, "cap", 17, limits={"max_chunk_stamps": 8})
    for r in recs.values():
        assert r["status"] == "ok", r
        assert len(r["chunks"]) == 8 and r["chunks_unstamped"] == 40 + 1 - 8   # + usage chunk
        assert r["chunk_output_tokens"] == 40 == r["output_tokens"]
        assert r["chunks_unstamped_tokens"] == 32
    assert any("chunks_unstamped" in w for w in summary["warnings"]), summary["warnings"]
