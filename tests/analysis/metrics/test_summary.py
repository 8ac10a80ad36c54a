"""summary.json contract: keys, measured phase only, None for missing data, run-dir loading."""
import json

import pytest

from analysis.metrics import summary
from tests.analysis.synth import MS, rec, server_meta, steady, write_run

CONTRACT = ("requests_completed", "requests_failed", "duration_s", "request_throughput",
            "output_throughput", "total_token_throughput", "goodput", "verdict")
DISTS = ("ttft_ms", "ttft_from_scheduled_ms", "tpot_ms", "itl_ms", "e2el_ms", "schedule_lag_ms")
FIELDS = ("mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max")


def test_contract_keys_and_hand_figures():
    # 3 warm-up + 20 measured: scheduled every 50 ms, sent 1 ms late, first token +20 ms,
    # 8 tokens 10 ms apart, usage chunk +10 ms: E2E 100 ms from send
    recs = steady(23, warmup=3)
    s = summary.summarize(recs, server_meta())
    for k in CONTRACT + DISTS + ("requests_cancelled", "window", "failures_by_kind",
                                 "token_counts", "chunk_gap_ms", "client", "slo", "mode", "energy"):
        assert k in s, k
    for k in DISTS:
        assert set(FIELDS) <= set(s[k])
    assert s["requests_completed"] == 20 and s["requests_warmup"] == 3
    # window: first measured send (3*50 + 1 ms) to last end (22*50 + 1 + 100 ms)
    assert s["window"]["start_ns"] == 151 * MS
    assert s["window"]["end_ns"] == 1201 * MS
    assert s["duration_s"] == pytest.approx(1.05)
    assert s["request_throughput"] == pytest.approx(20 / 1.05)
    assert s["output_throughput"] == pytest.approx(160 / 1.05)
    assert s["total_token_throughput"] == pytest.approx((160 + 200) / 1.05)
    assert s["ttft_ms"]["p50"] == pytest.approx(20.0)
    assert s["ttft_from_scheduled_ms"]["p99"] == pytest.approx(21.0)
    assert s["tpot_ms"]["mean"] == pytest.approx(80 / 7)
    assert s["itl_ms"]["count"] == 20 * 7 and s["itl_ms"]["max"] == pytest.approx(10.0)
    assert s["schedule_lag_ms"]["max"] == pytest.approx(1.0)
    assert s["goodput"] == pytest.approx(20 / 1.05)  # all pass 2000/100 ms
    assert s["headline_ttft"] == "ttft_from_scheduled_ms"
    assert s["verdict"]["valid"], s["verdict"]["reasons"]
    assert s["energy"] == {"status": "unmeasured", "reason": "no power source configured"}
    json.dumps(s, allow_nan=False)


def test_cancelled_counted_apart_and_failures_by_kind():
    recs = steady(10)
    recs[2].update(status="cancelled", error_kind="cancelled")
    recs[3].update(status="error", error_kind="timeout")
    s = summary.summarize(recs, server_meta(min_queries=0))
    assert (s["requests_completed"], s["requests_failed"], s["requests_cancelled"]) == (8, 1, 1)
    assert s["failures_by_kind"] == {"timeout": 1}
    assert not s["verdict"]["valid"]


def test_no_data_gives_none_not_zero():
    s = summary.summarize([rec(0, status="error", error_kind="connection", sent=None, end=None)],
                          {"mode": "concurrency"})
    assert s["requests_completed"] == 0 and s["duration_s"] is None
    assert s["request_throughput"] is None and s["output_throughput"] is None
    assert s["goodput"] is None
    for k in DISTS:
        assert all(s[k][f] is None for f in FIELDS) and s[k]["count"] == 0
    assert s["client"]["cpu_fraction"] is None and s["client"]["evidence"] == "unmeasured"
    assert s["energy"]["status"] == "unmeasured"


def test_client_saturation_flags():
    s = summary.summarize(steady(20), server_meta(client_cpu=0.96))
    assert s["client"]["saturated"] and "96%" in s["client"]["warnings"][0]
    recs = steady(30)
    for i, r in enumerate(recs):  # lag grows 0 -> 58 ms over the run
        r["sent_at_ns"] = r["scheduled_at_ns"] + i * 2 * MS
    s = summary.summarize(recs, server_meta())
    assert s["client"]["saturated"]
    assert any("schedule lag p99" in w for w in s["client"]["warnings"])
    assert [r["rule"] for r in s["client"]["reasons"]] == ["schedule_lag_ms_p99"]
    assert s["client"]["lag_growth_ms"] == pytest.approx(40.0)  # medians 9 and 49 ms
    assert not summary.summarize(steady(20), server_meta())["client"]["saturated"]


def test_power_configured_without_samples_stays_unmeasured():
    e = summary.energy_block(steady(3), {"power_sources": ["nvml"]}, [], None)
    assert e["status"] == "unmeasured"
    assert "power.jsonl holds no samples" in e["reason"] or "not available" in e["reason"]


def test_load_run_and_summarize_run(tmp_path):
    d = write_run(tmp_path / "run", steady(12, warmup=2), server_meta(min_queries=5))
    with open(d / "records.jsonl", "a") as f:
        f.write('{"id": 99, "phase": "meas')  # torn last line (killed mid-write)
    records, meta, sut = summary.load_run(d)
    assert len(records) == 12 and meta["mode"] == "server" and sut == {}
    s = summary.summarize_run(d)
    assert s["requests_completed"] == 10
    p = summary.write_summary(d)
    assert json.loads(p.read_text())["requests_completed"] == 10
    with pytest.raises(FileNotFoundError, match="no records.jsonl"):
        summary.load_run(tmp_path / "missing")


def test_named_sources_without_session_or_samples():
    e = summary.energy_block(steady(3), {"power_sources": ["nvml"]}, [], None)
    assert e["status"] == "unmeasured"
    assert "nvml configured but no sampling session ran" in e["reason"]


def test_energy_from_power_rows_via_energy_module():
    pytest.importorskip("analysis.energy.window")
    # 100 W on one GPU sampled every 100 ms from 0 to 2 s; window 1 ms .. 1051 ms (1.05 s)
    rows = [{"kind": "power_w", "source": "nvml", "device": 0, "scope": "gpu",
             "t_ns": k * 100 * MS, "value": 100.0} for k in range(21)]
    sources = [{"name": "nvml", "status": "ok", "evidence": "measured"}]
    s = summary.summarize(steady(20), server_meta(power_sources=sources), rows)
    e = s["energy"]
    assert e["status"] == "measured"
    assert e["energy_j"] == pytest.approx(105.0)
    assert e["j_per_output_token"] == pytest.approx(105.0 / 160)


def test_client_loop_lag_saturates_and_is_a_verdict_note():
    meta = server_meta(client_load={"loop_lag_ms_p99": 12.0})   # stamps not recorded: user
    s = summary.summarize(steady(20), meta)
    assert s["client"]["saturated"] and s["client"]["loop_lag_ms_p99"] == 12.0
    assert any("event-loop lag p99 12.0 ms" in w for w in s["client"]["warnings"])
    assert any("event-loop lag p99 12.0 ms" in n for n in s["verdict"]["notes"])
    assert s["verdict"]["valid"]


def test_summarize_run_reads_power_sources_json(tmp_path):
    d = write_run(tmp_path / "run", steady(5), server_meta(power_sources=None, min_queries=0))
    pytest.importorskip("analysis.energy.window")
    src = {"name": "nvml", "status": "unavailable", "reason": "no NVIDIA driver"}
    (d / "power_sources.json").write_text(json.dumps({"sources": [src]}))
    e = summary.summarize_run(d)["energy"]
    assert e["status"] == "unmeasured" and "no NVIDIA driver" in e["reason"]


def test_offline_lag_growth_is_not_saturation():
    recs = steady(30)
    for i, r in enumerate(recs):  # offline: all scheduled at t0, sent as slots free up
        r["scheduled_at_ns"] = 0
        r["sent_at_ns"] = i * 50 * MS
    s = summary.summarize(recs, {"mode": "offline", "client_cpu": 0.2})
    assert s["client"]["lag_growth_ms"] > 100 and not s["client"]["saturated"]


def test_unsent_requests_is_the_summary_s_own_field(tmp_path):
    """A closed loop's never-sent rest is written by the one summary function (from meta.json's
    count), not patched into summary.json afterwards; null when meta.json does not count it."""
    d = write_run(tmp_path / "run", steady(6), server_meta(min_queries=0, unsent_requests=4))
    s = summary.summarize_run(d)
    assert s["unsent_requests"] == 4
    assert json.loads(summary.write_summary(d).read_text())["unsent_requests"] == 4
    assert summary.summarize(steady(6), server_meta(min_queries=0))["unsent_requests"] is None


def test_a_ctrl_c_while_summarising_leaves_the_run_for_loadgen_report(tmp_path, monkeypatch):
    """Issue 29 item 3: KeyboardInterrupt while summarising: no summary.json (whole or none),
    records and meta intact; ``loadgen report DIR`` then writes it."""
    import subprocess
    import sys
    d = write_run(tmp_path / "run", steady(30), server_meta(min_queries=0))
    before = (d / "records.jsonl").read_bytes()

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(summary, "client_block", interrupted)
    with pytest.raises(KeyboardInterrupt):
        summary.store_summary(d)
    assert not (d / "summary.json").exists() and not list(d.glob(".*.tmp"))
    assert (d / "records.jsonl").read_bytes() == before
    out = subprocess.run([sys.executable, "-m", "loadgen.cli", "report", str(d), "--no-plots"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads((d / "summary.json").read_text())["requests_completed"] == 30
