"""The calibration server's app on 127.0.0.1 in this process: the ``server`` fixture."""
from __future__ import annotations

import pytest
from aiohttp.test_utils import TestServer

from servers.calib import make_app


@pytest.fixture
async def server():
    srv = TestServer(make_app(), host="127.0.0.1")
    await srv.start_server()
    yield srv
    await srv.close()
