"""``calib.rate_limit_first: k`` (servers/calib/handler.py): the first k attempts of a request are
429. Before, the attempt counts lived as long as the server: a rerun of a seeded scenario (the same
bodies) saw no 429 at all. Now a request's count is forgotten once it is served, ``POST
/calib/reset`` forgets every count (a run that gave up mid-way), and the table stays bounded."""
from __future__ import annotations

import aiohttp

from servers.calib import MODEL, handler
from servers.calib.app import CALIBRATION
from tests.servers.calib.calib_post import post_json


def body(prompt: str = "seeded prompt", k: int = 2) -> dict:
    return {"model": MODEL, "prompt": prompt, "max_tokens": 2, "stream": False,
            "calib": {"rate_limit_first": k, "retry_after": "1"}}


async def attempts(server, b: dict, n: int) -> list[int]:
    return [(await post_json(server, "/v1/completions", b))[0] for _ in range(n)]


async def test_a_rerun_of_the_same_bodies_is_rate_limited_again(server):
    b = body()
    assert await attempts(server, b, 3) == [429, 429, 200]      # the first run
    assert await attempts(server, b, 3) == [429, 429, 200]      # its rerun: the same answers
    assert len(server.app[CALIBRATION].attempts) == 0           # served: forgotten


async def test_reset_forgets_a_request_the_client_gave_up_on(server):
    b = body(k=3)
    assert await attempts(server, b, 1) == [429]                 # a run that gave up after one
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://127.0.0.1:{server.port}/calib/reset") as r:
            assert r.status == 200 and (await r.json())["forgotten"] == 1
    assert await attempts(server, b, 4) == [429, 429, 429, 200]   # counted from the start


async def test_the_table_of_counts_is_bounded(server, monkeypatch):
    monkeypatch.setattr(handler, "ATTEMPTS_MAX", 3)
    for i in range(6):                                           # six abandoned requests
        assert await attempts(server, body(f"p{i}"), 1) == [429]
    assert len(server.app[CALIBRATION].attempts) == 3            # the oldest forgotten
