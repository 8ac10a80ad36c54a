"""The sweep's prefix-cache warning is given only where a prefix cache can have helped (#38)."""
from loadgen.multirun.cache_hygiene import cache_seen, hygiene

NO_COUNTERS = {"prefix_cache": {"server_hit_rate": None, "requests_hit": 0, "requests_miss": 0,
                                "requests_unreported": 20,
                                "reasons": {"server_hit_rate":
                                            "the server exposes no prefix-cache counters"}}}


def test_a_server_without_a_prefix_cache_gets_no_warning():
    h = hygiene(20, 20, None, NO_COUNTERS)
    assert h["prompts_seen_before"] == 20
    assert h["warning"] is None
    assert h["cache_seen"] is False and "no prefix-cache counters" in h["cache_seen_reason"]


def test_a_point_with_hits_is_warned():
    s = {"prefix_cache": {"server_hit_rate": None, "requests_hit": 3, "requests_miss": 17}}
    h = hygiene(20, 20, None, s)
    assert h["cache_seen"] is True and "prefix-cache hits can lower TTFT" in h["warning"]


def test_a_server_hit_rate_above_zero_is_warned_and_zero_is_not():
    assert cache_seen({"prefix_cache": {"server_hit_rate": 0.4}})[0] is True
    assert cache_seen({"prefix_cache": {"server_hit_rate": 0.0}})[0] is False
    assert hygiene(5, 5, None, {"prefix_cache": {"server_hit_rate": 0.0}})["warning"] is None


def test_nothing_known_still_warns():
    s = {"prefix_cache": {"server_hit_rate": None, "reasons": {
        "server_hit_rate": "no server metrics (the /metrics scraper did not run)"}}}
    assert cache_seen(s)[0] is None
    assert hygiene(5, 5, None, s)["warning"] is not None
    assert hygiene(5, 5, None, None)["warning"] is not None      # no summary at all
