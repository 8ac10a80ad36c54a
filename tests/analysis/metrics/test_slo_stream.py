"""Streaming-aware SLOs (analysis.metrics.slo): TTFT/TPOT/ITL on a non-streamed run, the "no data"
reasons by limit, and goodput saying which limits it judged."""
from analysis.metrics import slo
from analysis.metrics import figures as m
from analysis.metrics.summary import summarize
from tests.analysis.synth import rec, server_meta, steady


def whole(n: int) -> list:
    """A non-streamed run: each answer arrives whole (no chunks, no first-token time)."""
    return [rec(i, sched=i * 50, sent=i * 50 + 1, end=i * 50 + 30, out=8) for i in range(n)]


def test_a_preset_on_a_non_streamed_run_fails_with_the_reason_not_no_data():
    v = slo.verdict(whole(40), server_meta(stream=False))
    assert not v["valid"]
    ttft = next(r for r in v["reasons"] if "TTFT" in r)
    assert ttft == ("p99 TTFT from scheduled (limit 2000 ms): TTFT not measured: the run was not "
                    "streamed (api.stream: false), so no answer has a first-token time; they need "
                    "api.stream: true")
    assert any(r.startswith("p99 TPOT (limit 100 ms): TPOT not measured") for r in v["reasons"])
    assert not any("no data" in r for r in v["reasons"])


def test_no_data_reasons_name_what_was_missing_per_limit():
    one_token = steady(40, tokens=1)
    v = slo.verdict(one_token, server_meta(slo={"tpot_ms": 100, "itl_ms": 50}))
    assert "p99 TPOT: no data: every completed output had ≤ 1 token (TPOT needs 2 or more)" \
        in v["reasons"]
    assert "p99 ITL: no data: no completed stream had 2 or more token chunks" in v["reasons"]
    failed = [dict(r, status="error") for r in steady(10)]
    v = slo.verdict(failed, server_meta(slo={"ttft_ms": 100}))
    assert "p99 TTFT from scheduled: no data: no measured request completed" in v["reasons"]


def test_goodput_names_the_limits_it_judged():
    recs = steady(40)
    win = m.window(recs)
    limits = slo.resolve_slo({"preset": "server/llama3_1-8b"})
    g = slo.goodput_fields(recs, limits, server_meta(), win, from_scheduled=True)
    assert g["goodput"] == m.goodput(recs, limits, win, True) and g["goodput"] > 0
    assert g["goodput_rule"].startswith("requests/s meeting every limit: TTFT from scheduled ≤ "
                                        "2000 ms, TPOT ≤ 100 ms (preset server/llama3_1-8b")
    assert "a request without a TPOT/ITL value" in g["goodput_rule"]
    e2e = slo.goodput_fields(recs, slo.resolve_slo({"e2el_ms": 500}), server_meta(), win, False)
    assert e2e["goodput_rule"] == "requests/s meeting every limit: E2E ≤ 500 ms (scenario)"
    none = slo.goodput_fields(recs, slo.resolve_slo({}), server_meta(), win, False)
    assert none["goodput"] is None and none["goodput_rule"].startswith("not computed: no per-")


def test_a_non_streamed_run_has_no_goodput_under_a_ttft_limit_but_has_one_under_e2e():
    recs = whole(40)
    s = summarize(recs, server_meta(stream=False))
    assert s["goodput"] is None
    assert s["goodput_rule"].startswith("not computed: TTFT/TPOT not measured: the run was not "
                                        "streamed (api.stream: false)")
    s = summarize(recs, server_meta(stream=False, slo={"e2el_ms": 1000}))
    assert s["goodput"] is not None and s["goodput"] > 0
    assert s["verdict"]["valid"], s["verdict"]["reasons"]


def test_stream_warnings_before_a_run():
    assert slo.stream_warnings({"preset": "server/llama3_1-8b"}, stream=True) == []
    assert slo.stream_warnings({"e2el_ms": 100}, stream=False) == []
    (w,) = slo.stream_warnings({"preset": "server/llama3_1-8b"}, stream=False)
    assert w.startswith("slo: TTFT/TPOT not measured: the run was not streamed")
    assert "(preset server/llama3_1-8b" in w and "verdict will be INVALID" in w
    assert w.endswith("set api.stream: true or drop slo.preset")
