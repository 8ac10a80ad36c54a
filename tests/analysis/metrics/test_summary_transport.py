"""analysis/metrics/summary.py client block: the transport, its stamp source, coalesced reads."""
from analysis.metrics import summary
from tests.analysis.synth import rec, server_meta, steady


def test_wire_transport_stamp_source_and_coalesced_share():
    recs = steady(4)                                  # 8 token chunks each, all on their own read
    recs[1]["chunks"][3][0] = recs[1]["chunks"][2][0]  # two token chunks in one read
    for r in recs:
        r["coalesced_reads"] = 0
    recs[1]["coalesced_reads"] = 1
    recs.append(rec(9, phase="warmup", chunks=[[1, 1], [1, 1]], coalesced_reads=5))   # not measured
    meta = server_meta(client_transport={"transport": "wire", "stamp_source": "kernel"})
    c = summary.summarize(recs, meta)["client"]
    assert (c["transport"], c["stamp_source"], c["coalesced_reads"]) == ("wire", "kernel", 1)
    assert c["coalesced_reads_share"] == 1 / (8 * 4 - 1)      # reads carrying tokens: 31


def test_aiohttp_or_old_runs_say_none():
    c = summary.summarize(steady(3), server_meta(client_transport={"transport": "aiohttp",
                                                                    "stamp_source": "user"}))["client"]
    assert (c["transport"], c["stamp_source"], c["coalesced_reads"], c["coalesced_reads_share"]) == (
        "aiohttp", "user", None, None)
    old = summary.summarize(steady(3), server_meta())["client"]   # meta from before the field
    assert old["stamp_source"] is None and old["coalesced_reads"] is None
