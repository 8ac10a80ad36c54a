"""The hostile server's cases about what a server SAYS (issue #41): figures and headers that are
well-formed HTTP but absurd, for analysis/server/sanity.py's gate to refuse.

    GET /metrics ─► metrics_text(case, k)   (k: how many /metrics answers came before this one)
        running_nan / running_inf / running_text   vllm:num_requests_running NaN / +Inf / abc
                                                   (load.cancel's leak check reads it after the run)
        counter_reset      prefix-cache counters (hits/queries) 400/800 until the first answer,
                           then 190/200 (a restart), then 1400/1600: the end points alone say
                           Δ 1,000 hits of 800 queries (125 %); the series says a reset
        prefix_hits_over   hits grow ten times as fast as queries (1000k vs 100k)
        every other case   404 (no /metrics)
    POST ─► CASES_SAID[case](req, reader, writer), the answer (a normal stream where the case's
        hostility is on /metrics)
        retry_after_nonascii   429 with ``Retry-After: ²`` (the byte 0xB2: str.isdigit says yes)
        transcription_invalid_utf8   a plain-text transcription stream (transformers serve's
                           shape) whose second event holds bytes that are not UTF-8
        endless_tokens_1m  endless_tokens' answer; bench/hostile.py asks max_tokens 10^6 of it,
                           so no event bound fires before api.timeout_s
"""
from __future__ import annotations

from typing import Callable, Optional

from servers.hostile.pieces import LAST, STATE, chunk, head, json_answer, stream_events

RUNNING = "vllm:num_requests_running"
HITS, QUERIES = "vllm:prefix_cache_hits", "vllm:prefix_cache_queries"
LABELS = '{model_name="hostile"}'
RUNNING_VALUE = {"running_nan": "NaN", "running_inf": "+Inf", "running_text": "abc"}


def _counter(name: str, v: float) -> str:
    return f"# TYPE {name} counter\n{name}_total{LABELS} {v:.1f}\n"


def metrics_text(case: str, k: int) -> Optional[str]:
    """The /metrics body of ``case`` on its k-th answer (0-based), or None (404)."""
    if case in RUNNING_VALUE:
        return f"# TYPE {RUNNING} gauge\n{RUNNING}{LABELS} {RUNNING_VALUE[case]}\n"
    if case == "counter_reset":
        if not STATE["served"]:                  # before the first answer: the start edge
            hits, queries = 400, 800
        else:                                    # a restart, then growth past the start:
            j = k - STATE.setdefault("reset_k", k)   # the end points alone say Δ 1,000 / 800
            hits, queries = (190, 200) if j == 0 else (1400, 1600)
    elif case == "prefix_hits_over":
        hits, queries = 1000 * k, 100 * k
    else:
        return None
    return (f"# TYPE {RUNNING} gauge\n{RUNNING}{LABELS} 0\n"
            + _counter(HITS, hits) + _counter(QUERIES, queries))


async def normal_stream(req, reader, writer) -> bool:
    STATE["served"] += 1
    writer.write(head() + b"".join(chunk(e) for e in stream_events(req)) + LAST)
    return True


async def retry_after_nonascii(req, reader, writer) -> bool:
    body = json_answer({"error": {"message": "slow down", "type": "rate_limit_exceeded"}},
                       "429 Too Many Requests")
    status, rest = body.split(b"\r\n", 1)
    writer.write(status + b"\r\nRetry-After: \xb2\r\n" + rest)
    return True


async def transcription_invalid_utf8(req, reader, writer) -> bool:
    evs = [b"data: hello\n\n", b"data: wor\xff\xfeld \xc3(\n\n", b"data: !\n\n"]
    writer.write(head() + b"".join(chunk(e) for e in evs) + LAST)
    return True


CASES_SAID: dict[str, Callable] = {
    **{name: normal_stream for name in (*RUNNING_VALUE, "counter_reset", "prefix_hits_over")},
    "retry_after_nonascii": retry_after_nonascii,
    "transcription_invalid_utf8": transcription_invalid_utf8,
}
