"""loadgen/scenario/target.py: target.url must be an http(s) base URL, named in one line."""
from __future__ import annotations

import pytest

from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.strict import ScenarioError

LOAD = {"mode": "server", "rate": 1, "num_requests": 2}


def _err(url: str) -> str:
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict({"target": {"url": url}, "load": LOAD})
    return str(e.value)


@pytest.mark.parametrize("url,base", [("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
                                      ("https://api.example.com/openai/v1/", "https://api.example.com/openai")])
def test_a_url_ending_in_v1_is_refused_naming_target_url(url, base):
    assert _err(url) == (f"target.url: '{url}' ends in /v1: give the server's base URL, {base} "
                         "(loadgen adds /v1/completions, /v1/models itself)")


@pytest.mark.parametrize("url,hint", [("127.0.0.1:8000", "http://127.0.0.1:8000"),
                                      ("localhost:8000", "http://localhost:8000"),
                                      ("ftp://host/x", "http://HOST:PORT")])
def test_a_url_without_an_http_scheme_is_one_line(url, hint):
    assert _err(url) == f"target.url: '{url}' is not an http:// or https:// URL (e.g. {hint})"


def test_base_urls_pass():
    for url in ("http://127.0.0.1:8000", "https://host/prefix/", "http://[::1]:8000"):
        assert scenario_from_dict({"target": {"url": url}, "load": LOAD}).target.url == url


def _tree_err(target: dict) -> str:
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict({"target": target, "load": LOAD})
    return str(e.value)


def test_urls_are_replicas_with_a_balance():
    t = scenario_from_dict({"target": {"urls": ["http://127.0.0.1:8001/", "http://127.0.0.1:8002"],
                                       "balance": "least_in_flight"}, "load": LOAD}).target
    assert t.replica_urls == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    assert t.primary_url == "http://127.0.0.1:8001" and t.balance == "least_in_flight"
    one = scenario_from_dict({"target": {"urls": ["http://127.0.0.1:8001"]}, "load": LOAD}).target
    assert one.replica_urls is None and one.primary_url == "http://127.0.0.1:8001"
    assert scenario_from_dict({"target": {"url": "http://h:1"}, "load": LOAD}).target.balance \
        == "round_robin"


@pytest.mark.parametrize("target,msg", [
    ({"url": "http://a:1", "urls": ["http://b:1"]}, "give exactly one of target.url, target.urls"),
    ({"urls": []}, "target.urls: give at least one URL"),
    ({"urls": ["http://a:1", "http://a:1/"]}, "target.urls: http://a:1 is listed twice"),
    ({"urls": ["http://a:1", "a:2"]}, "target.urls: 'a:2' is not an http:// or https:// URL"),
    ({"urls": ["http://a:1"], "balance": "random"}, "target.balance"),
])
def test_bad_urls_are_one_line_naming_the_field(target, msg):
    err = _tree_err(target)
    assert msg in err and "\n" not in err
