"""server_traces against the real JAX server that loadgen starts (tiny preset, 2 slots; slow): a
sweep of two load points on ONE managed server, traced to the port the sweep pins. Every record
carries the server's own span (queue, prefill, TTFT, decode, e2e from its stamps); the server's
TTFT never exceeds the client's; and the queue grows with the load (6 streams on 2 slots wait,
1 stream does not). The in-process version over a fake engine: tests/servers/jax/test_spans.py."""
from __future__ import annotations

import json

import pytest
import yaml

from loadgen.cli import main as cli_main
from tests.loadgen.run.jax_e2e import jax_scenario

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]   # a JAX compile on a busy box


def test_a_traced_jax_sweep_joins_every_record_and_its_queue_grows_with_load(tmp_path):
    sc = jax_scenario("jax-traces", "chat", {"prompt_tokens": {"dist": "fixed", "value": 16},
                                             "output_tokens": {"dist": "fixed", "value": 16}})
    sc["load"] = {"mode": "concurrency", "concurrency": 1, "num_requests": 12, "warmup_requests": 1}
    sc["server_traces"] = {"otlp_port": 0, "wait_s": 10, "quiet_s": 0.2}
    sc["sweep"] = {"param": "load.concurrency", "values": [1, 6]}
    sc["output"] = {"dir": str(tmp_path), "run_name": "sweep", "report": "text"}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sc))
    assert cli_main(["sweep", str(path)]) == 0
    queue = {}
    for c in (1, 6):
        d = tmp_path / "sweep" / f"concurrency-{c}"
        recs = [json.loads(x) for x in (d / "records.jsonl").read_text().splitlines()]
        assert len(recs) == 13 and all(r["status"] == "ok" for r in recs)
        for r in recs:
            t = r["server_timing"]
            assert t["source"] == "otlp" and t["scheduler_ms"] is None
            assert t["queue_ms"] + t["prefill_ms"] == pytest.approx(t["server_ttft_ms"], abs=1e-3)
            assert t["server_ttft_ms"] <= (r["first_token_at_ns"] - r["sent_at_ns"]) / 1e6 + 1e-3
            assert t["server_ttft_ms"] + t["decode_ms"] <= t["server_e2e_ms"] + 1e-3
        st = json.loads((d / "summary.json").read_text())["server_timing"]
        assert st["status"] == "ok" and st["joined"] == 12 and st["bad_spans"] == {}
        queue[c] = st["phases"]["queue_ms"]["p50"]
    assert queue[6] > queue[1] + 1.0      # 6 streams on 2 slots: a request waits for a slot
