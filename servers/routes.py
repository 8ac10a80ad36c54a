"""The OpenAI-compatible paths loadgen asks of a server, registered in one place for servers/.

    add_openai_routes(app, completions=h, chat=h, models=h, health=h, reset_prefix_cache=h)
        POST /v1/completions, POST /v1/chat/completions   the answers
        GET  /v1/models, GET /health                      what preflight reads (targets/probe, ready)
        POST /reset_prefix_cache                          vLLM's dev-mode reset (sweeps' cache hygiene)

The calibration server (servers/calib/app.py) and the JAX engine (servers/jax/api.py) both answer
these; each adds its own paths beside them. aiohttp only, no state.
"""
from __future__ import annotations

from typing import Any

from aiohttp import web


def add_openai_routes(app: web.Application, *, completions: Any, chat: Any, models: Any,
                      health: Any, reset_prefix_cache: Any) -> None:
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_post("/reset_prefix_cache", reset_prefix_cache)
