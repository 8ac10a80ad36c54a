"""load.cancel with api.retry and with a non-streamed answer, through the asyncio Client on
both transports (wire, aiohttp) against the real calibration server (issue 41 items 14, 20).
No timing asserts: what is checked is how many attempts reached the server and the record."""
import pytest

from loadgen.client.hangup import Hangup, HangupRule
from loadgen.client.http_client import Client, ClientConfig, RequestSpec
from loadgen.scenario.workload import PromptSpec
from loadgen.client.retry import RetryPolicy


def _cfg(server, calib, **kw):
    return ClientConfig(base_url=server.url, model="calib-model",
                        extra_body={"calib": calib}, **kw)


async def _one(cfg, prompt, transport):
    spec = RequestSpec.of(PromptSpec(prompt, 3, 40), 3)
    async with Client(cfg, 2, transport=transport) as client:
        return await client.execute(spec)


@pytest.mark.parametrize("transport", ["wire", "aiohttp"])
async def test_a_hang_up_due_in_the_retry_wait_is_not_sent_again(calib_server, transport):
    """after_ms 300 from the first send, a 429 with Retry-After 2 s: the client hangs up in the
    wait (aborted, one attempt); before the fix it waited, sent again and hung up 300 ms after
    that second send."""
    cfg = _cfg(calib_server, {"ttft_ms": 5, "itl_ms": 50, "rate_limit_first": 1,
                              "retry_after": "2"})
    cfg.retry = RetryPolicy(frozenset({429}), 3, True)
    cfg.cancel = HangupRule(1.0, 1, Hangup(after_ms=300))
    prompt = f"hang in the wait {transport}"
    rec = await _one(cfg, prompt, transport)
    assert (rec.status, rec.error_kind) == ("aborted", "aborted"), rec.error
    assert "after the first send" in rec.error
    assert rec.attempts == 1 and [a[0] for a in rec.attempt_log] == [429]
    assert rec.end_at_ns - rec.sent_at_ns >= 300_000_000        # not before the deadline
    assert [e.get("status") for e in calib_server.log() if e["prompt"] == prompt] == [429]


@pytest.mark.parametrize("transport", ["wire", "aiohttp"])
async def test_after_ms_hangs_up_a_non_streamed_request(calib_server, transport):
    """api.stream false: the answer comes whole after ~2 s; the hang-up timer (the transport's,
    from the send) aborts it at 150 ms, as it does a stream."""
    cfg = _cfg(calib_server, {"ttft_ms": 5, "itl_ms": 50}, stream=False)
    cfg.cancel = HangupRule(1.0, 1, Hangup(after_ms=150))
    rec = await _one(cfg, f"no stream hang {transport}", transport)
    assert (rec.status, rec.error_kind) == ("aborted", "aborted"), rec.error
    assert rec.end_at_ns - rec.sent_at_ns >= 150_000_000 and rec.output_tokens is None
