"""OpenAI-compatible HTTP layer of the JAX server (aiohttp app factory).

    POST /v1/completions, /v1/chat/completions ─► protocol.build_plan ─► generation.Generation
         ─► orchestrator (engine thread) ─► Pieces ─► SSE chunks (one per token) or one JSON response
    POST /v1/responses ─► responses.build_responses_plan (input/instructions → the chat messages) ─► the same
         Generation ─► named SSE events (response.created … response.output_text.delta per token …
         response.completed | response.incomplete | response.failed; no [DONE]) or one "response" object
    POST /v1/embeddings ─► embeddings.build_embed_plan ─► embeddings.Embedding ─► orchestrator (one input
         per engine iteration: a prefill-only forward, mean-pooled, L2-normalised) ─► one JSON response
    GET  /v1/models   served model id(s) + max_model_len     GET /health  200 once ready, else 503
    POST /reset_prefix_cache  forget the prefix cache's blocks (vLLM's dev-mode route); 404 when it is off
    GET  /info        engine describe() + server settings    GET /metrics vLLM-named Prometheus text
                      (server: max_model_len and the tokenizer, which loadgen's context check reads)
    --otlp-traces-endpoint URL: a request with a W3C traceparent ─► its span (queue, prefill, TTFT,
         decode, e2e; vLLM's attribute names) posted there after it ends (spans.py)

Status codes: 400 invalid request / 404 unknown model (protocol.py) / 401 bad API key (code
"invalid_api_key") / 503 queue full (code "queue_full"), warming up ("not_ready") or engine stopped, all with
{"error": {"message", "type", "param", "code"}}. Shutdown ends in-flight streams with finish_reason "abort".

Handlers never block the event loop: the engine runs on the orchestrator's thread and its callbacks come
back through loop.call_soon_threadsafe. Any error becomes an OpenAI-style JSON error body; the server keeps
serving. With an API key, every /v1/* route needs `Authorization: Bearer <key>` (401 otherwise); /health,
/info and /metrics stay open, as in vLLM.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from servers.jax.embeddings import POOLING, Embedding, build_embed_plan, response_body
from servers.jax.generation import Generation, Piece
from servers.jax.metrics import ServerMetrics
from servers.jax.requests import QueueFull, RequestTooLong
from servers.jax.protocol import ApiError, Plan, build_plan
from servers.jax import responses as responses_api
from servers.routes import add_openai_routes
from servers.jax.spans import RequestSpans
from servers.otlp import SpanSender, parse_traceparent

log = logging.getLogger(__name__)


@dataclass
class ServerState:
    orchestrator: Any
    tokenizer: Any
    describe: dict
    model_name: str
    max_model_len: int
    api_key: str | None
    settings: dict
    metrics: ServerMetrics
    ready: bool = False
    created: int = field(default_factory=lambda: int(time.time()))
    active: set[Generation] = field(default_factory=set)
    model_names: tuple[str, ...] = ()   # every served name (--served-model-name a,b); the first is model_name


STATE = web.AppKey("jax_server_state", ServerState)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _served(st: ServerState, body: Any) -> str:
    """The served name a request asked for (one of --served-model-name a,b: same weights), else the
    first: protocol.py answers an unknown one 404 model_not_found, as vLLM."""
    want = body.get("model") if isinstance(body, dict) else None
    return want if isinstance(want, str) and want in st.model_names else st.model_name


def error_response(err: ApiError) -> web.Response:
    return web.json_response(err.body(), status=err.status, dumps=_dumps)


def set_ready(app: web.Application, ready: bool = True) -> None:
    app[STATE].ready = ready


def abort_all(app: web.Application) -> None:
    """End every in-flight request now (shutdown): their streams finish with finish_reason "abort"."""
    for gen in list(app[STATE].active):
        gen.abort()


@web.middleware
async def _errors_and_auth(request: web.Request, handler):
    st: ServerState = request.app[STATE]
    if st.api_key is not None and request.path.startswith("/v1"):
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {st.api_key}".encode()):
            return error_response(ApiError(401, "invalid or missing API key (send Authorization: Bearer <key>)",
                                           code="invalid_api_key"))
    try:
        return await handler(request)
    except ApiError as e:
        return error_response(e)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return error_response(ApiError(e.status, f"{request.method} {request.path}: {e.reason}",
                                       type_="invalid_request_error" if e.status < 500 else "server_error"))
    except (asyncio.CancelledError, ConnectionError):
        raise
    except Exception as e:  # noqa: BLE001 - never let one request take the server down
        log.exception("unhandled error in %s %s", request.method, request.path)
        return error_response(ApiError(500, f"internal error: {type(e).__name__}: {e}", type_="server_error"))


# ---- response bodies -------------------------------------------------------------------------------------------
def _usage(prompt: int, completion: int, cached: int | None = None) -> dict:
    """OpenAI usage; ``prompt_tokens_details.cached_tokens`` only with the prefix cache on (as
    vLLM sends it only with --enable-prompt-tokens-details): the prompt tokens whose K/V it reused."""
    out = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def _chunk(plan: Plan, rid: str, created: int, text: str, finish: str | None, role: bool = False) -> dict:
    if plan.kind == "chat":
        delta: dict = {"role": "assistant", "content": ""} if role else ({"content": text} if text else {})
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        obj = "text_completion"
    return {"id": rid, "object": obj, "created": created, "model": plan.model, "choices": [choice]}


def _full(plan: Plan, rid: str, created: int, text: str, finish: str | None, usage: dict) -> dict:
    if plan.kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                  "finish_reason": finish}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        obj = "text_completion"
    return {"id": rid, "object": obj, "created": created, "model": plan.model, "choices": [choice],
            "usage": usage}


# ---- generation handlers ---------------------------------------------------------------------------------------
async def _body(request: web.Request) -> Any:
    st: ServerState = request.app[STATE]
    if not st.ready:
        raise ApiError(503, "the server is still warming up; retry when GET /health returns 200",
                       type_="server_error", code="not_ready")
    try:
        return await request.json()
    except (ValueError, RecursionError) as e:
        raise ApiError(400, f"request body is not valid JSON: {e}") from None


def _submit(job, param: str) -> None:
    """``job.submit()`` (a Generation or an Embedding), the engine's refusals as API errors:
    queue full / engine stopped 503, too long 400 naming ``param``."""
    try:
        job.submit()
    except QueueFull as e:
        raise ApiError(503, f"server busy: {e}", type_="server_error", code="queue_full") from None
    except RequestTooLong as e:
        raise ApiError(400, str(e), param=param, code="context_length_exceeded") from None
    except RuntimeError as e:
        raise ApiError(503, f"engine unavailable: {e}", type_="server_error", code="engine_stopped") from None


def _start(st: ServerState, plan: Plan, rid: str, arrival_ns: int, request: web.Request) -> Generation:
    """Submit one plan to the engine (the chat/completions and responses handlers share it); a
    W3C traceparent on the request makes its span (spans.py)."""
    gen = Generation(st.orchestrator, st.tokenizer, plan, rid, st.metrics, arrival_ns)
    gen.timing.trace = parse_traceparent(request.headers.get("traceparent"))
    _submit(gen, "prompt")
    st.active.add(gen)
    return gen


async def _generate(request: web.Request, kind: str) -> web.StreamResponse:
    arrival_ns = time.perf_counter_ns()
    st: ServerState = request.app[STATE]
    body = await _body(request)
    plan = build_plan(kind, body, st.tokenizer, _served(st, body), st.max_model_len)  # type: ignore[arg-type]
    rid = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex}"
    gen = _start(st, plan, rid, arrival_ns, request)
    try:
        if plan.stream:
            return await _stream(request, plan, gen, rid)
        return await _collect(plan, gen, rid)
    finally:
        st.active.discard(gen)
        gen.close()


async def _collect(plan: Plan, gen: Generation, rid: str) -> web.Response:
    created = int(time.time())
    texts = [p.text async for p in gen.pieces()]
    body = _full(plan, rid, created, "".join(texts), gen.finish_reason,
                 _usage(gen.prompt_tokens, gen.completion_tokens, gen.cached_tokens))
    return web.json_response(body, dumps=_dumps)


async def _stream(request: web.Request, plan: Plan, gen: Generation, rid: str) -> web.StreamResponse:
    created = int(time.time())
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       "X-Request-Id": rid})
    await resp.prepare(request)

    async def send(obj: dict) -> None:
        await resp.write(b"data: " + _dumps(obj).encode() + b"\n\n")

    def with_usage(obj: dict) -> dict:
        if plan.continuous_usage:
            obj["usage"] = _usage(gen.prompt_tokens, gen.completion_tokens, gen.cached_tokens)
        return obj

    try:
        if plan.kind == "chat":
            await send(with_usage(_chunk(plan, rid, created, "", None, role=True)))
        piece: Piece
        async for piece in gen.pieces():
            if piece.text or piece.finish_reason is not None:
                await send(with_usage(_chunk(plan, rid, created, piece.text, piece.finish_reason)))
        if plan.include_usage:
            obj = "chat.completion.chunk" if plan.kind == "chat" else "text_completion"
            await send({"id": rid, "object": obj, "created": created, "model": plan.model, "choices": [],
                        "usage": _usage(gen.prompt_tokens, gen.completion_tokens, gen.cached_tokens)})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
    except ConnectionError:  # the client went away; _generate's finally cancels the request
        log.debug("client of %s disconnected mid-stream", rid)
    return resp


async def _completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "completions")


async def _chat(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "chat")


async def _responses(request: web.Request) -> web.StreamResponse:
    """POST /v1/responses: the chat path's generation, answered as Responses API events or object."""
    arrival_ns = time.perf_counter_ns()
    st: ServerState = request.app[STATE]
    body = await _body(request)
    plan, meta = responses_api.build_responses_plan(body, st.tokenizer, _served(st, body), st.max_model_len)
    rid = f"resp_{uuid.uuid4().hex}"
    gen = _start(st, plan, rid, arrival_ns, request)
    obj = responses_api.ResponseObject(rid, plan, meta)
    try:
        if not plan.stream:
            return web.json_response(await responses_api.collect(gen, obj), dumps=_dumps)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Request-Id": rid})
        await resp.prepare(request)
        await responses_api.stream(resp, gen, obj)
        return resp
    finally:
        st.active.discard(gen)
        gen.close()


async def _embeddings(request: web.Request) -> web.Response:
    arrival_ns = time.perf_counter_ns()
    st: ServerState = request.app[STATE]
    if not st.ready:
        raise ApiError(503, "the server is still warming up; retry when GET /health returns 200",
                       type_="server_error", code="not_ready")
    try:
        body = await request.json()
    except (ValueError, RecursionError) as e:
        raise ApiError(400, f"request body is not valid JSON: {e}") from None
    dim = int((st.describe.get("model") or {}).get("dim") or 0)
    plan = build_embed_plan(body, st.tokenizer, _served(st, body), st.max_model_len, dim)
    emb = Embedding(st.orchestrator, plan, f"embd-{uuid.uuid4().hex}")
    _submit(emb, "input")
    try:
        vectors = await emb.vectors()
    except asyncio.CancelledError:          # the client went away: free the engine of it
        emb.abort()
        raise
    if vectors is None:
        raise ApiError(503, "the request was aborted (server shutting down)", type_="server_error",
                       code="aborted")
    body = response_body(plan, vectors)
    st.metrics.on_embedded(arrival_ns, time.perf_counter_ns(), plan.prompt_tokens)
    return web.json_response(body, dumps=_dumps)


# ---- info handlers ---------------------------------------------------------------------------------------------
async def _models(request: web.Request) -> web.Response:
    st: ServerState = request.app[STATE]
    cards = [{"id": name, "object": "model", "created": st.created, "owned_by": "loadgen",
              "root": st.model_name, "parent": None, "max_model_len": st.max_model_len}
             for name in st.model_names or (st.model_name,)]
    return web.json_response({"object": "list", "data": cards}, dumps=_dumps)


async def _health(request: web.Request) -> web.Response:
    st: ServerState = request.app[STATE]
    error = getattr(st.orchestrator, "error", None)
    if error is not None:
        return web.json_response({"status": "error", "error": repr(error)}, status=503)
    if not st.ready:
        return web.json_response({"status": "starting"}, status=503)
    return web.json_response({"status": "ok"})


async def _info(request: web.Request) -> web.Response:
    st: ServerState = request.app[STATE]
    body = dict(st.describe)
    describe_tok = getattr(st.tokenizer, "describe", None)
    body["server"] = {**st.settings, "served_model_name": st.model_name, "max_model_len": st.max_model_len,
                      "tokenizer": describe_tok() if callable(describe_tok) else None,
                      "api_key_required": st.api_key is not None, "ready": st.ready,
                      "embeddings": {"pooling": POOLING, "dim": (st.describe.get("model") or {}).get("dim"),
                                     "encoding_formats": ["float", "base64"],
                                     "max_input_tokens": st.max_model_len}}
    return web.json_response(body, dumps=lambda o: json.dumps(o, default=str))


async def _reset_prefix_cache(request: web.Request) -> web.Response:
    """POST /reset_prefix_cache (vLLM's dev-mode route, what loadgen's sweep.reset_prefix_cache
    calls): forget every cached block; 404 when the prefix cache is off."""
    st: ServerState = request.app[STATE]
    reset = getattr(st.orchestrator, "reset_prefix_cache", None)
    n = await asyncio.get_running_loop().run_in_executor(None, reset) if reset is not None else None
    if n is None:
        raise ApiError(404, "the prefix cache is off (servers.jax --prefix-cache on)", code="not_found")
    return web.json_response({"status": "ok", "blocks_forgotten": n})


async def _metrics(request: web.Request) -> web.Response:
    body, ctype = request.app[STATE].metrics.render()
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = ctype
    return resp


def create_app(orchestrator: Any, tokenizer: Any, describe: dict, *, model_name: str, max_model_len: int,
               api_key: str | None = None, settings: dict | None = None, ready: bool = False,
               otlp_traces_endpoint: str | None = None) -> web.Application:
    """Build the aiohttp app around a started orchestrator; call set_ready(app) once warm-up is done.
    ``otlp_traces_endpoint``: a span per traced request posted there (spans.py)."""
    app = web.Application(middlewares=[_errors_and_auth], client_max_size=64 * 1024 * 1024)
    names = tuple(dict.fromkeys(model_name.split(",")))          # "a,b": several names, same weights
    model_name = names[0]
    app[STATE] = ServerState(orchestrator=orchestrator, tokenizer=tokenizer, describe=describe,
                             model_name=model_name, max_model_len=int(max_model_len), api_key=api_key or None,
                             settings=dict(settings or {}), ready=ready,
                             metrics=ServerMetrics(model_name, orchestrator.stats), model_names=names)
    add_openai_routes(app, completions=_completions, chat=_chat, models=_models, health=_health,
                      reset_prefix_cache=_reset_prefix_cache)
    app.router.add_post("/v1/embeddings", _embeddings)
    app.router.add_post("/v1/responses", _responses)
    app.router.add_get("/info", _info)
    app.router.add_get("/metrics", _metrics)
    if otlp_traces_endpoint:
        sender = SpanSender(otlp_traces_endpoint, "servers.jax")
        app[STATE].metrics.finished_hooks.append(RequestSpans(sender).on_finish)

        async def close_spans(app: web.Application) -> None:
            await sender.close()
        app.on_cleanup.append(close_spans)
    return app
