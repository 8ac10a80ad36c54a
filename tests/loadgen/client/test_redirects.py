"""Redirects are never followed silently (loadgen/client/http1/redirects.py)."""
from __future__ import annotations

import pytest

from loadgen.client.http1.redirects import redirect_message, redirect_target

URL = "http://127.0.0.1:8000/v1/completions"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_never_follows_by_default(status):
    assert redirect_target(URL, status, "/v1/other", "never") is None


@pytest.mark.parametrize("status,location,want", [
    (307, "/v2/completions", "http://127.0.0.1:8000/v2/completions"),
    (308, "http://127.0.0.1:8000/x", "http://127.0.0.1:8000/x"),
    (307, "http://127.0.0.1:8001/x", None),      # another port: another server
    (307, "http://localhost:8000/x", None),      # another host name
    (307, "https://127.0.0.1:8000/x", None),     # another scheme
    (302, "/v2/completions", None),              # would turn the POST into a GET
    (200, "/v2/completions", None),
    (307, None, None),
])
def test_same_host_follows_only_307_308_to_the_same_origin(status, location, want):
    assert redirect_target(URL, status, location, "same-host") == want


def test_the_message_names_the_location_and_the_option():
    msg = redirect_message(307, "http://127.0.0.1:9/x")
    assert "307" in msg and "http://127.0.0.1:9/x" in msg and "api.follow_redirects" in msg
