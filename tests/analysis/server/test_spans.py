"""analysis.server.spans: OTLP export bodies (protobuf, JSON) ─► checked timings; hostile bodies
and values are a reason, never a figure or an exception."""
import math

import pytest

from analysis.server import spans
from tests.analysis.server.otlp_bodies import E, GOOD, P, Q, T, js, pb, tid


@pytest.mark.parametrize("enc,as_json", [(pb, False), (js, True)])
def test_a_span_decodes_to_ms(enc, as_json):
    d = spans.decode(enc([(tid(1), GOOD)]), as_json=as_json)
    assert d.reason is None and d.spans[0][0] == tid(1)
    t, why = spans.timing(d.spans[0][1])
    assert why is None
    assert t["queue_ms"] == pytest.approx(2.0) and t["prefill_ms"] == pytest.approx(3.0)
    assert t["server_ttft_ms"] == pytest.approx(6.0) and t["server_e2e_ms"] == pytest.approx(20)
    assert t["decode_ms"] is None and t["scheduler_ms"] is None     # not sent: null, never 0


@pytest.mark.parametrize("body", [b"\xff\xff\xff\xff garbage", b"\x0a\xff\xff\xff\xff\x0f",
                                  bytes(range(256)) * 4])
def test_garbage_protobuf_is_a_reason(body):
    d = spans.decode(body)
    assert d.spans == [] and d.reason and "not an OTLP trace export" in d.reason


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"resourceSpans": 5}', b"\xff"])
def test_garbage_json_is_a_reason(body):
    d = spans.decode(body, as_json=True)
    assert d.spans == [] and d.reason


@pytest.mark.parametrize("attrs,why", [
    ({**GOOD, Q: math.nan}, "NaN"),
    ({**GOOD, P: -0.001}, "negative"),
    ({**GOOD, E: math.inf}, "+Inf"),
    ({**GOOD, Q: 0.005, P: 0.005}, "disagree"),           # queue + prefill > server TTFT
    ({**GOOD, T: "fast"}, "not a number"),
    ({"gen_ai.latency.e2e": True}, "not a number"),
])
def test_bad_values_are_reasons_never_figures(attrs, why):
    for enc, as_json in ((pb, False), (js, True)):
        d = spans.decode(enc([(tid(1), attrs)]), as_json=as_json)
        t, reason = spans.timing(d.spans[0][1])
        assert t is None and why in reason


def test_spans_past_the_bound_are_counted_not_kept():
    body = pb([(tid(i), GOOD) for i in range(5000)], extra_foreign=3)
    d = spans.decode(body, max_spans=100)
    assert len(d.spans) == 100 and d.dropped == 4903 and d.foreign == 0
    d = spans.decode(pb([(tid(1), GOOD)], extra_foreign=3))
    assert len(d.spans) == 1 and d.foreign == 3
