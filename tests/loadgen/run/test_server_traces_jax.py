"""server_traces against the real JAX server that loadgen starts (tiny preset; slow): the managed
server gets --otlp-traces-endpoint, every record carries the server's own span (queue, prefill,
TTFT, decode, e2e from its stamps), the server's TTFT never exceeds the client's, and summary.json
splits the TTFT. The in-process version over a fake engine: tests/servers/jax/test_spans.py."""
from __future__ import annotations

import json

import pytest

from tests.loadgen.run.jax_e2e import jax_scenario, run_scenario_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]   # a JAX compile on a busy box


def test_every_record_gets_the_jax_servers_own_span(tmp_path):
    sc = jax_scenario("jax-traces", "chat", {"prompt_tokens": {"dist": "fixed", "value": 16},
                                             "output_tokens": {"dist": "fixed", "value": 8}})
    sc["server_traces"] = {"otlp_port": 0, "wait_s": 10, "quiet_s": 0.2}
    d, recs = run_scenario_cli(tmp_path, sc, "traces")
    assert len(recs) == 9 and all(r["status"] == "ok" for r in recs)
    for r in recs:
        t = r["server_timing"]
        assert t["source"] == "otlp" and t["scheduler_ms"] is None
        assert t["queue_ms"] + t["prefill_ms"] == pytest.approx(t["server_ttft_ms"], abs=1e-3)
        client_ttft_ms = (r["first_token_at_ns"] - r["sent_at_ns"]) / 1e6
        assert t["server_ttft_ms"] <= client_ttft_ms + 1e-3     # the server's clock starts later
        assert t["server_ttft_ms"] + t["decode_ms"] <= t["server_e2e_ms"] + 1e-3
    st = json.loads((d / "summary.json").read_text())["server_timing"]
    assert st["status"] == "ok" and st["joined"] == 8 and st["bad_spans"] == {}
    assert st["ttft_split"]["p50"]["prefill_ms"] > 0
