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
