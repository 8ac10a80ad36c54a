"""analysis/metrics/saturation.py: the client is saturated only when it changed the measurement."""
from analysis.metrics import saturation, summary
from tests.analysis.synth import MS, closed_loop, server_meta, steady

KERNEL = {"transport": "wire", "stamp_source": "kernel"}
AIOHTTP = {"transport": "aiohttp", "stamp_source": "user"}


def _wire(recs: list) -> list:
    for r in recs:
        r["coalesced_reads"] = 0
    return recs


def _rules(block: dict) -> list:
    return [r["rule"] for r in block["reasons"]]


def test_quiet_main_job_with_kernel_stamps_is_not_flagged():
    # issue 18: cpu_fraction 0.008 and loop lag p99 5.8 ms with kernel stamps was "saturated"
    meta = server_meta(client_cpu=0.008, client_transport=KERNEL,
                       client_load={"loop_lag_ms_p99": 5.8})
    s = summary.summarize(_wire(steady(20)), meta)
    c = s["client"]
    assert (c["saturated"], c["reasons"], c["warnings"]) == (False, [], [])
    assert c["loop_lag_ms_p99"] == 5.8 and c["schedule_lag_ms_p99"] == 1.0   # figures still shown
    assert not any("event-loop" in n for n in s["verdict"]["notes"])


def test_loop_lag_counts_only_where_stamps_are_user_space():
    for tr in (AIOHTTP, {"transport": "wire", "stamp_source": "mixed"}, None):
        meta = server_meta(client_cpu=0.008, client_transport=tr,
                           client_load={"loop_lag_ms_p99": 5.8})
        c = summary.summarize(steady(20), meta)["client"]
        assert c["saturated"] and c["reasons"] == [
            {"rule": "loop_lag_ms_p99", "value": 5.8, "limit": 5.0}], tr
        assert "5.8 ms (> 5 ms) with user-space stamps" in c["warnings"][0]


def test_1024_lockstep_streams_on_one_core_are_flagged_by_coalescing_and_cpu():
    # 1,024 lockstep streams, the client core at 88 % (timing_truth 2026-12-03): a chunk every
    # 10 ms on every stream, and the client gets back to each socket late, so half of the token
    # reads carry two chunks (one stamp for both); the next request is sent 30 ms after the
    # stream became free. Kernel stamps: the loop lag (12.6 ms) is not a reason itself.
    recs = closed_loop(8, 4, tokens=16)
    for r in recs:
        ch = r["chunks"]
        for k in range(1, len(ch), 2):
            ch[k - 1][0] = ch[k][0]                  # the earlier chunk got the later stamp
        r["coalesced_reads"] = len(ch) // 2
        r["sent_at_ns"] = r["scheduled_at_ns"] + 30 * MS
    meta = server_meta(mode="concurrency", client_cpu=0.88, client_transport=KERNEL,
                       client_load={"loop_lag_ms_p99": 12.6})
    c = summary.summarize(recs, meta)["client"]
    assert c["saturated"] and _rules(c) == ["schedule_lag_ms_p99", "coalesced_reads_share"]
    assert c["reasons"][1] == {"rule": "coalesced_reads_share", "value": 1.0, "limit": 0.05}
    assert c["coalesced_reads_share"] == 1.0          # every token read carried two chunks
    assert "100.0% of token reads carried more than one chunk" in c["warnings"][1]
    hot = summary.summarize(recs, {**meta, "client_cpu": 0.95})["client"]
    assert _rules(hot) == ["schedule_lag_ms_p99", "cpu_fraction", "coalesced_reads_share"]
    assert hot["reasons"][1] == {"rule": "cpu_fraction", "value": 0.95, "limit": 0.9}


def test_late_sends_against_the_schedule_use_the_slo_limit():
    recs = steady(20, lag_ms=25)
    assert _rules(saturation.saturation(recs, server_meta(), {"max_schedule_lag_ms": 10.0})) == [
        "schedule_lag_ms_p99"]
    assert not saturation.saturation(recs, server_meta(), {"max_schedule_lag_ms": 50.0})[
        "saturated"]
    assert saturation.saturation(recs, server_meta(), None)["limits"]["schedule_lag_ms_p99"] == 10


def test_offline_waiting_for_a_slot_is_not_late():
    recs = steady(30)
    for i, r in enumerate(recs):          # all scheduled at t0, sent as slots free up
        r["scheduled_at_ns"], r["sent_at_ns"] = 0, i * 50 * MS
    sat = saturation.saturation(recs, {"mode": "offline", "client_cpu": 0.2}, None)
    assert not sat["saturated"] and sat["figures"]["schedule_lag_ms_p99"] is None


def test_judge_boundaries_and_missing_figures():
    lim = saturation.limits({"max_schedule_lag_ms": 10.0})
    at = {"schedule_lag_ms_p99": 10.0, "cpu_fraction": 0.9, "coalesced_reads_share": 0.05,
          "loop_lag_ms_p99": 5.0, "user_space_stamps": True}
    assert _rules({"reasons": saturation.judge(at, lim)}) == ["cpu_fraction"]   # CPU: ≥ limit
    none = dict.fromkeys(at)
    assert saturation.judge(none, lim) == []      # nothing recorded: nothing claimed
    assert saturation.coalesced_share(steady(3)) == (None, None)    # aiohttp: not counted
