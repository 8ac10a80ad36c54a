"""loadgen.client.trace_context: the one traceparent rule (W3C version 00, sampled)."""
import re

import pytest

from analysis.contract.record import Record
from loadgen.client.http_client import ClientConfig
from loadgen.client.trace_context import TraceContext
from loadgen.scenario.api import Api

TP = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01\Z")


def rec(i=7):
    return Record(id=i, phase="measured")


def test_stamp_adds_a_sampled_traceparent_and_keeps_the_trace_id():
    tc = TraceContext(prefix="00000000000000ab")
    base = {"Content-Type": "application/json"}
    r = rec(7)
    h = tc.stamp(base, r)
    m = TP.match(h["traceparent"])
    assert m and m.group(1) == "00000000000000ab0000000000000007" == r.trace_id
    assert int(m.group(2), 16) != 0
    assert "traceparent" not in base            # the run's headers are never mutated
    assert h["Content-Type"] == "application/json"


def test_ids_unique_per_request_and_per_sender():
    a, b = TraceContext(), TraceContext()
    assert a.prefix != b.prefix                 # a random run prefix per sending process
    ids = {a.stamp({}, rec(i))["traceparent"] for i in range(1000)}
    assert len(ids) == 1000
    assert a.trace_id(3) == a.prefix + "0000000000000003"


def test_request_id_zero_still_has_a_nonzero_span_id():
    h = TraceContext(prefix="1111111111111111").stamp({}, rec(0))
    assert TP.match(h["traceparent"]).group(2) == "0000000000000001"


@pytest.mark.parametrize("bad", ["", "0" * 16, "ABCDEFABCDEFABCD", "12345"])
def test_bad_prefix_refused(bad):
    with pytest.raises(ValueError):
        TraceContext(prefix=bad)


def test_switch_off_sends_nothing_and_keeps_no_trace_id():
    tc = TraceContext.of(Api(traceparent=False))
    base = {"a": "b"}
    r = rec()
    assert tc.stamp(base, r) is base and r.trace_id is None


def test_users_own_traceparent_wins_unjoined():
    tc = TraceContext.of(Api(headers={"TraceParent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}))
    assert not tc.on


def test_client_config_carries_the_switch():
    assert ClientConfig.from_api(Api(traceparent=False), "http://x", "m", None).traceparent is False
    assert TraceContext.of(ClientConfig.from_api(Api(), "http://x", "m", None)).on


def test_span_id_is_the_parent_id_sent():
    from loadgen.client.trace_context import span_id
    tc = TraceContext(prefix="1111111111111111")
    for i in (0, 1, 77, 2**64 - 1, 2**64):
        assert TP.match(tc.stamp({}, rec(i))["traceparent"]).group(2) == span_id(i)
