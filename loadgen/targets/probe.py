"""Before the run: is the target there, does it serve api.model, will it take loadgen's requests?

    ready.wait_ready (a 503 or an unhealthy /health waits, up to api.ready_timeout_s) ─►
    GET {url}/v1/models ─► fetch_models() ─► check_models()
        unreachable (refused, timeout, no such host) | HTTP 401/403 | 5xx (still loading)
        | api.model not in the list                    ─► ProbeError: one line, the URL and the cause
    one small request (the run's own body, a short prompt, max_tokens 1) ─► probe_request()
        2xx                                            ─► ok
        4xx that names fields loadgen sent (``transformers serve``: ``Unexpected fields in the
        request: {'ignore_eos'}``; also min_tokens, stream_options, any api.extra_body key)
            api.drop_rejected_fields true (default) ─► drop them, a warning, probe again
            api.drop_rejected_fields false          ─► ProbeError naming the field and the fix
        401/403, 404, any other 4xx                    ─► ProbeError (the run would fail whole)
        503 (warming up, queue full)                   ─► ready.ReadyWait.pause: ask again until
                                                          api.ready_timeout_s (then ProbeError)
        other 5xx, 429, timeout, a broken stream       ─► a warning; the run goes on and says so
    then fit.check_context_fit: the largest prompt + output against the server's stated context

``ProbeError`` is a ``ScenarioError``: the CLI prints its one line and exits 2, before any
measured request. ``api.probe: false`` skips all of this but the wait for readiness (the
/v1/models answer is then only used to pick a model when api.model is not given). Warnings and
dropped fields go to meta.json ``probe`` and from there to summary.json (``warnings``,
``dropped_fields``). fetch_models, ProbeError and the one-line causes live in reach.py (ready.py
uses them too); they are importable from here as before.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from loadgen.client.http_client import Client, ClientConfig, RequestSpec
from loadgen.client.request import base_body, optional_fields
from loadgen.scenario.workload import PromptSpec
from loadgen.targets.reach import (REFUSED, SNIPPET, ProbeError, body_message,  # noqa: F401
                                  connection_cause, fetch_models, one_line, request_headers,
                                  server_message)

if TYPE_CHECKING:
    from loadgen.targets.ready import ReadyWait

PROBE_PROMPT = "Hello"
PROBE_TIMEOUT_S = 120.0       # at most; api.timeout_s when shorter
# how to stop sending each field loadgen itself adds (the rest come from api.extra_body)
FIX = {"ignore_eos": "api.ignore_eos: false",
       "stream_options": "api.include_usage: false",
       "stream_options.include_usage": "api.include_usage: false",
       "stream_options.continuous_usage_stats": "api.continuous_usage: false"}


def model_ids(models: Any) -> Optional[list[str]]:
    """The ids of a /v1/models answer, or None when it is not that shape."""
    try:
        return [str(m["id"]) for m in models["data"]]
    except (TypeError, KeyError):
        return None


def check_models(base_url: str, got: dict, want: Optional[str], api_key_env: Optional[str],
                 managed: bool = False, where: Optional[str] = None,
                 key: str = "api.model") -> tuple[str, list[str]]:
    """The model to ask for, and warnings; ProbeError when the target cannot serve the run.
    ``where``: the field named in an error (default target.server or target.url)."""
    url = base_url.rstrip("/") + "/v1/models"
    where = where or ("target.server" if managed else "target.url")
    status = got.get("status")
    if status is None:
        raise ProbeError(f"{where}: cannot reach {url}: {got.get('cause') or got.get('error')}")
    body = f" ({got['body']})" if got.get("body") else ""
    if status in (401, 403):
        fix = (f"the key in ${api_key_env} was refused" if api_key_env else
               "no API key was sent: set api.api_key_env to the name of the variable that holds it")
        raise ProbeError(f"api.api_key_env: {url} answered HTTP {status}{body}: {fix}")
    warnings: list[str] = []
    ids = model_ids(got.get("models")) if status == 200 else None
    if status != 200 and status != 404:
        raise ProbeError(f"{where}: {url} answered HTTP {status}{body}: the server is not ready "
                         "to serve (api.probe: false skips this check)")
    if ids is None:
        if want is None:
            raise ProbeError(f"api.model: not given, and {url} named no model (HTTP {status}"
                             f"{body})")
        warnings.append(f"{url} answered HTTP {status}{body} without a model list: api.model "
                        f"'{want}' not checked")
        return want, warnings
    if want is None:
        if not ids:
            raise ProbeError(f"api.model: not given, and {url} named no model (empty list)")
        return ids[0], warnings
    if want not in ids:
        shown = ", ".join(repr(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise ProbeError(f"{key}: '{want}' is not served by {base_url} ({url} lists "
                         f"{shown or 'no model'})")
    return want, warnings


def rejected_fields(message: str, candidates: list[str]) -> list[str]:
    """The candidates an error message names as words (``ignore_eos`` in ``{'ignore_eos'}``);
    a nested field (``stream_options.x``) when its own name appears, else its parent."""
    def named(name: str) -> bool:
        return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])",
                         message) is not None
    out = []
    for c in candidates:
        top, _, sub = c.partition(".")
        if sub:
            if named(sub):
                out.append(c)
        elif named(top) and not any(x.startswith(top + ".") and named(x.partition(".")[2])
                                    for x in candidates):
            out.append(c)
    return out


@dataclass
class ProbeResult:
    status: str = "ok"                      # ok | warning | skipped
    http_status: Optional[int] = None
    attempts: int = 0
    dropped_fields: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    error_kind: Optional[str] = None
    error: Optional[str] = None
    output_tokens: Optional[int] = None
    finish_reason: Optional[str] = None
    ready: Optional[dict] = None            # ready.ReadyWait.describe(): how long it waited
    context: Optional[dict] = None          # fit.check_context_fit: the context and the workload

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _fix_for(f: str) -> str:
    return FIX.get(f, f"remove '{f}' from api.extra_body")


def _probe_audio(endpoint: str):
    """api.endpoint transcriptions: the probe sends a 1 s clip (loadgen.scenario.audio)."""
    if endpoint != "transcriptions":
        return None
    from loadgen.scenario.audio import probe_clip
    return probe_clip()


async def probe_request(cfg: ClientConfig, drop_rejected: bool, min_tokens: int = 1,
                        ready: "Optional[ReadyWait]" = None) -> ProbeResult:
    """One small request with the run's own body (``cfg``); see the module doc. With ``ready``
    an HTTP 503 waits (and asks again) on its deadline instead of going ahead with a warning."""
    try:
        res = await _probe(cfg, drop_rejected, min_tokens, ready)
    finally:
        if ready is not None:
            ready.close()
    res.ready = ready.describe() if ready is not None else None
    return res


async def _probe(cfg: ClientConfig, drop_rejected: bool, min_tokens: int,
                 ready: "Optional[ReadyWait]") -> ProbeResult:
    res = ProbeResult()
    drop: list[str] = list(cfg.drop_fields)
    max_tokens = max(1, min_tokens)
    url = cfg.base_url.rstrip("/")
    while True:
        c = ClientConfig(**{**cfg.__dict__, "drop_fields": tuple(drop),
                            "timeout_s": min(cfg.timeout_s, PROBE_TIMEOUT_S)})
        async with Client(c, 1) as client:
            probe = PromptSpec(PROBE_PROMPT, None, max_tokens, audio=_probe_audio(cfg.endpoint))
            rec = await client.execute(RequestSpec.of(probe, -1, "probe"))
            path = client.url
        res.attempts += 1
        res.http_status, res.error_kind, res.error = rec.http_status, rec.error_kind, rec.error
        res.output_tokens, res.finish_reason = rec.output_tokens, rec.finish_reason
        code = rec.http_status or 0
        if rec.status == "ok":
            break
        if code == 503 and ready is not None:
            await ready.pause(f"POST {path}: {server_message(rec.error)}")
            continue
        if rec.error_kind != "http" or code >= 500 or code in (408, 429):
            # the server's or the network's trouble, not the scenario's: the run will show it
            res.status = "warning"
            res.warnings.append(f"the probe request to {path} failed ({rec.error_kind}: "
                                f"{server_message(rec.error)}); the run went ahead")
            break
        msg = server_message(rec.error)
        if code in (401, 403):
            raise ProbeError(f"api.api_key_env: {path} answered {msg}")
        body = base_body(c, c.model, c.drop_fields)
        bad = [f for f in rejected_fields(rec.error or "", optional_fields(body)) if f not in drop]
        if not bad:
            hint = (f"; is api.endpoint '{cfg.endpoint}' served there?" if code in (404, 405)
                    else "")
            raise ProbeError(f"api: the probe request to {path} was refused: {msg}{hint} "
                             "(api.probe: false skips this check)")
        names = ", ".join(bad)
        if not drop_rejected:
            raise ProbeError(f"api: {url} rejects {names} ({msg}): set "
                             f"{'; '.join(dict.fromkeys(_fix_for(f) for f in bad))}, or "
                             "api.drop_rejected_fields: true to drop rejected fields")
        drop += bad
        res.dropped_fields += bad
        res.status = "warning"
        res.warnings.append(
            f"{url} rejected {names} ({msg}): dropped from every request of this run"
            + ("; outputs may end before max_tokens (no ignore_eos)" if "ignore_eos" in bad else ""))
    return res
