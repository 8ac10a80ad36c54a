"""A POST to the calibration server of the ``server`` fixture (tests/servers/calib/conftest.py)."""
from __future__ import annotations

import aiohttp


async def post_json(srv, path: str, body: dict) -> tuple[int, str]:
    """POST ``body`` as JSON: (HTTP status, the whole answer as text)."""
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://127.0.0.1:{srv.port}{path}", json=body) as r:
            return r.status, (await r.read()).decode()
