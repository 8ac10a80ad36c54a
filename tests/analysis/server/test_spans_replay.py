"""Kept export bodies (server_traces.keep_raw_mb) and their replay (analysis/server/spans_replay.py):
what the receiver keeps is what came, bounded; a replay through a fresh receiver gives the same
timings as the live run; a torn line is counted, not read."""
from __future__ import annotations

import json
import urllib.request

from analysis.server.otlp_receiver import Receiver
from analysis.server.spans_replay import replay
from servers.otlp import export_json

ATTRS = {"gen_ai.latency.time_in_queue": 0.002, "gen_ai.latency.time_in_model_prefill": 0.003,
         "gen_ai.latency.time_to_first_token": 0.006, "gen_ai.latency.e2e": 0.020}


def post(url: str, body: bytes, ctype: str = "application/json") -> int:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_kept_bodies_replay_to_the_live_timings_and_the_bound_holds(tmp_path):
    raw = tmp_path / "server_spans.raw.jsonl"
    bodies = [export_json("srv", f"{i + 1:032x}", "b7ad6b7169203331", ATTRS, 1, 2) for i in range(5)]
    limit = 3 * (len(json.dumps({"json": True, "body": ""})) + 4 * len(bodies[0]) // 3 + 8)
    with Receiver(0, raw_path=raw, raw_max_bytes=limit) as rx:
        for b in bodies:
            assert post(rx.endpoint, b) == 200
        assert post(rx.endpoint, b"not protobuf", "application/x-protobuf") == 400
        live = rx.snapshot()
    assert live["raw_bodies"] == 3 and live["raw_dropped"] == 3         # the bound, counted
    assert len(live["timings"]) == 5
    back = replay(raw)
    assert back["timings"] == {k: live["timings"][k] for k in back["timings"]}
    assert len(back["timings"]) == 3 and back["skipped_lines"] == []


def test_a_torn_last_line_is_counted_not_read(tmp_path):
    raw = tmp_path / "server_spans.raw.jsonl"
    with Receiver(0, raw_path=raw, raw_max_bytes=1 << 20) as rx:
        post(rx.endpoint, export_json("srv", "1" * 32, "b7ad6b7169203331", ATTRS, 1, 2))
    raw.write_bytes(raw.read_bytes() + b'{"json": true, "body": "eyJy')      # a crash mid-line
    back = replay(raw)
    assert list(back["timings"]) == ["1" * 32] and back["skipped_lines"] == [2]
