"""load.cancel's records checked alike on every engine and server (tests/loadgen/run/test_hangups_run.py,
test_hangups_jax.py, tests/loadgen/engine/locust/test_locust_hangups.py):

    chosen(sc, ids)                  the ids the scenario's seeded rule hangs up (measured phase)
    assert_hung_up(sc, recs, n, after_tokens, tokens)
                                     some of the n requests were hung up, not all: each of those
                                     aborted after after_tokens streamed tokens, every other one
                                     ok with all its tokens ─► the hung-up ids
"""
from __future__ import annotations

from loadgen.client.hangup import HangupRule


def chosen(sc, ids) -> set[int]:
    rule = HangupRule.of_scenario(sc)
    return {i for i in ids if rule.of(i, "measured") is not None}


def assert_hung_up(sc, recs: dict[int, dict], n: int, after_tokens: int, tokens: int) -> set[int]:
    hung = chosen(sc, recs)
    assert 0 < len(hung) < n                       # the seeded choice picked some, not all
    for i, r in recs.items():
        if i in hung:
            assert r["status"] == "aborted" and r["chunk_output_tokens"] == after_tokens, r
        else:
            assert r["status"] == "ok" and r["output_tokens"] == tokens, r
    return hung
