"""The aiohttp application: routes ─► Calibration (handler.py) and the inspection endpoints.

    POST /v1/completions, /v1/chat/completions   the answers (handler.py)
    POST /v1/audio/transcriptions                a multipart upload, a timed transcript (audio.py)
    GET  /v1/models                              one model, ``calib-model`` (max_model_len 4096); with
                                                 --models a,b those ids (a request for another: 404)
    GET  /health                                 200 "ok"
    GET  /calib/log[?clear=1]                    per request: arrival_ns, each write [ns, tokens], ...
    GET  /calib/clock[?clear=1]                  lockstep ticks [k, planned_ns, start_ns, end_ns, streams]
    POST /reset_prefix_cache, GET /calib/resets  vLLM's dev-mode reset, counted (sweeps' cache hygiene)
    POST /calib/reset                            forget every rate_limit_first count (a new run)
    GET  /calib/spans                            --otlp-endpoint: each span sent, by trace id (spans.py)
"""
from __future__ import annotations

import time
from typing import Optional

from aiohttp import web

from servers.calib.audio import Transcriber
from servers.calib.chunks import MODEL
from servers.calib.handler import DEFAULTS, Calibration
from servers.calib.spans import traced
from servers.otlp import SpanSender
from servers.routes import add_openai_routes

CALIBRATION = web.AppKey("calibration", Calibration)   # app[CALIBRATION]: the server's state


def make_app(defaults: Optional[dict] = None, log: bool = True,
             models: Optional[list] = None, otlp_endpoint: Optional[str] = None) -> web.Application:
    """The calibration server's app; ``defaults`` override DEFAULTS (a request's ``calib`` wins);
    ``models``: the ids /v1/models lists and requests may name (None: calib-model, any name taken);
    ``otlp_endpoint``: a span per traced request posted there (spans.py)."""
    cal = Calibration({**DEFAULTS, **(defaults or {})}, log, models=models)
    ids = list(models) if models else [MODEL]
    resets: list[int] = []             # POST /reset_prefix_cache (vLLM dev mode): counted

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": i, "object": "model", "created": 1700000000, "owned_by": "calibration",
             "max_model_len": 4096} for i in ids]}, headers={"Server": "calibration-server/1"})

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def get_log(request: web.Request) -> web.Response:
        out = list(cal.log)
        if request.query.get("clear"):
            cal.log.clear()
        return web.json_response(out)

    async def get_clock(request: web.Request) -> web.Response:
        clear = bool(request.query.get("clear"))
        return web.json_response([c.describe(clear) for c in cal.clocks.values()])

    async def reset(request: web.Request) -> web.Response:
        resets.append(time.perf_counter_ns())
        return web.json_response({"ok": True})

    async def forget(request: web.Request) -> web.Response:
        return web.json_response({"forgotten": cal.forget_attempts()})

    async def get_resets(request: web.Request) -> web.Response:
        return web.json_response(resets)

    app = web.Application(client_max_size=64 * 2**20)
    generate = cal.generate
    if otlp_endpoint:
        spans = SpanSender(otlp_endpoint, "servers.calib")
        generate = traced(spans, cal.generate, lambda b: {**cal.defaults, **(
            b.get("calib") if isinstance(b.get("calib"), dict) else {})})

        async def get_spans(request: web.Request) -> web.Response:
            return web.json_response(spans.describe())

        async def close_spans(app: web.Application) -> None:
            await spans.close()
        app.router.add_get("/calib/spans", get_spans)
        app.on_cleanup.append(close_spans)
    add_openai_routes(app, completions=generate, chat=generate, models=models, health=health,
                      reset_prefix_cache=reset)
    app.router.add_post("/v1/audio/transcriptions", Transcriber(cal).transcribe)
    app.router.add_get("/calib/log", get_log)
    app.router.add_get("/calib/clock", get_clock)
    app.router.add_get("/calib/resets", get_resets)
    app.router.add_post("/calib/reset", forget)
    app[CALIBRATION] = cal
    return app
