"""loadgen.client.balance: the pure pick, and Balanced against real servers on 127.0.0.1."""
import asyncio

import pytest

from loadgen.client.balance import Balanced, open_client, pick
from loadgen.client.http_client import Client, ClientConfig, RequestSpec
from loadgen.scenario.workload import PromptSpec
from servers.calib import CalibrationServer

_ids = iter(range(10**6))


def spec():
    i = next(_ids)
    return RequestSpec.of(PromptSpec(f"req-{i}", 3, 4), i)


def test_round_robin_follows_the_send_order_whatever_is_in_flight():
    assert [pick([9, 0, 0], t, "round_robin") for t in range(5)] == [0, 1, 2, 0, 1]


def test_least_in_flight_takes_the_emptiest_ties_in_turn():
    assert pick([2, 0, 1], 0, "least_in_flight") == 1
    assert pick([0, 0, 0], 2, "least_in_flight") == 2        # idle fleet: still in turn
    assert pick([1, 0, 0], 3, "least_in_flight") == 1        # turn 0 is busy: the next free one
    assert pick([0, 1, 0], 1, "least_in_flight") == 2
    with pytest.raises(ValueError, match="target.balance"):
        pick([0], 0, "random")


def test_one_url_is_a_plain_client():
    cfg = ClientConfig(base_url="http://127.0.0.1:1", model="m")
    assert isinstance(open_client(cfg, None, "round_robin", 4), Client)
    assert isinstance(open_client(cfg, ["http://127.0.0.1:1", "http://127.0.0.1:2"],
                                  "round_robin", 4), Balanced)


def test_round_robin_over_two_real_servers(calib_server):
    with CalibrationServer() as other:
        urls = [calib_server.url, other.url]
        cfg = ClientConfig(base_url="unused", model="calib-model")

        async def go():
            async with Balanced(cfg, urls, "round_robin", 4) as c:
                recs = [await c.execute(spec()) for _ in range(6)]
                return recs, c.describe(), c.transport_info()
        recs, desc, info = asyncio.run(go())
    assert [r.target_url for r in recs] == urls * 3
    assert all(r.status == "ok" and r.output_tokens == 4 for r in recs)
    assert [x["requests_sent"] for x in desc["replicas"]] == [3, 3]
    assert desc["balance"] == "round_robin"
    assert [x["url"] for x in info["replicas"]] == urls


def test_least_in_flight_sends_nothing_to_a_replica_that_holds_a_request(calib_server):
    """Replica B accepts and holds the first request it gets (until the test lets go); while it
    does, every other request goes to A. Event-driven: no timing involved."""
    async def go():
        got, release = asyncio.Event(), asyncio.Event()

        async def hold(reader, writer):
            await reader.read(1)
            got.set()
            await release.wait()
            writer.close()

        srv = await asyncio.start_server(hold, "127.0.0.1", 0)
        b = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        urls = [calib_server.url, b]
        cfg = ClientConfig(base_url="unused", model="calib-model", timeout_s=60)
        try:
            async with Balanced(cfg, urls, "least_in_flight", 4) as c:
                first = await c.execute(spec())                 # idle fleet, turn 0: A
                held = asyncio.ensure_future(c.execute(spec()))   # turn 1: B, which holds it
                await asyncio.wait_for(got.wait(), 30)
                rest = [await c.execute(spec()) for _ in range(4)]
                release.set()
                held_rec = await asyncio.wait_for(held, 30)
        finally:
            srv.close()
            await srv.wait_closed()
        return urls, first, held_rec, rest
    urls, first, held_rec, rest = asyncio.run(go())
    assert first.target_url == urls[0] and held_rec.target_url == urls[1]
    assert [r.target_url for r in rest] == [urls[0]] * 4
    assert all(r.status == "ok" for r in [first] + rest)
    assert held_rec.status == "error"           # B closed without an answer: a record, no raise
