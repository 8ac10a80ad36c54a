"""sut.json: what was measured and from where — target, its models and headers, the client host.

    base_url ─► GET /v1/models (JSON + response headers) ─┐
    managed server (argv, GET /info describe())           ├─► describe_sut() ─► sut.json
    client host (hostname, CPUs, python, platform, pkgs) ─┘   (analysis.contract.Sut.dump:
                                                              named keys, schema_version)

Nothing here is secret: request headers (which may hold an API key) are never stored.
"""
from __future__ import annotations

import importlib.metadata as md
import os
import platform
import socket
import sys
from typing import Optional

import aiohttp

from analysis.contract import Sut

PACKAGES = ("loadgen", "aiohttp", "numpy", "pydantic", "rich", "psutil", "jax", "jaxlib",
            "tokenizers", "torch", "vllm", "nvidia-ml-py")
KEEP_HEADERS = ("server", "content-type", "x-request-id", "date", "via")


def keep_headers(headers: Optional[dict]) -> dict:
    """The response headers worth keeping (server identity, ids); never request headers."""
    return {k.lower(): v for k, v in (headers or {}).items()
            if k.lower() in KEEP_HEADERS or k.lower().startswith("x-")}


def package_versions(names=PACKAGES) -> dict:
    out = {}
    for n in names:
        try:
            out[n] = md.version(n)
        except md.PackageNotFoundError:
            out[n] = None
    return out


def client_host() -> dict:
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        import psutil
        mem = psutil.virtual_memory().total
    except Exception:
        mem = None
    return {"hostname": socket.gethostname(), "cpu_count": os.cpu_count(),
            "cpu_affinity": affinity, "memory_bytes": mem, "python": sys.version.split()[0],
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "machine": platform.machine(), "processor": platform.processor() or None,
            "packages": package_versions()}


async def fetch_models(base_url: str, api_key: Optional[str], timeout_s: float) -> dict:
    """GET {base_url}/v1/models. Returns {"status", "models" (JSON or None), "headers", "error"}."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = base_url.rstrip("/") + "/v1/models"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as s:
            async with s.get(url, headers=headers, allow_redirects=False) as r:
                body = await r.json(content_type=None) if r.status == 200 else None
                return {"status": r.status, "models": body, "headers": keep_headers(r.headers),
                        "error": None}
    except (aiohttp.ClientError, OSError, ValueError, TimeoutError) as e:
        return {"status": None, "models": None, "headers": {},
                "error": f"{type(e).__name__}: {e}"}


async def fetch_self_description(base_url: str, api_key: Optional[str], timeout_s: float) -> dict:
    """What an external server says about itself: GET /info (loadgen's JAX server: preset, shape,
    dtype, device), GET /version (vLLM) and GET /props (llama.cpp's llama-server: build_info,
    slots, context). Each key is the JSON, or None where not offered."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    out: dict = {"info": None, "version": None, "props": None}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as s:
            for key, path in (("info", "/info"), ("version", "/version"), ("props", "/props")):
                try:
                    async with s.get(base_url.rstrip("/") + path, headers=headers,
                                     allow_redirects=False) as r:
                        if r.status == 200:
                            out[key] = await r.json(content_type=None)
                except (aiohttp.ClientError, OSError, ValueError, TimeoutError):
                    continue
    except (aiohttp.ClientError, OSError, TimeoutError):
        pass
    return out


def first_model_id(models: Optional[dict]) -> Optional[str]:
    try:
        return models["data"][0]["id"]
    except (TypeError, KeyError, IndexError):
        return None


PROPS_KEEP = ("build_info", "total_slots", "model_path", "n_ctx")   # llama-server's /props, small


def server_version(own: dict, headers: Optional[dict]) -> dict:
    """The server's own word on its version: {"version", "source"}, or {"version": None,
    "reason"} when it offers none (written as missing, never guessed)."""
    ver, props = own.get("version"), own.get("props")
    if isinstance(ver, dict) and isinstance(ver.get("version"), str):
        return {"version": ver["version"], "source": "GET /version"}
    if isinstance(props, dict) and isinstance(props.get("build_info"), str):
        return {"version": props["build_info"], "source": "GET /props build_info"}
    info = own.get("info")
    if isinstance(info, dict) and isinstance(info.get("version"), str):
        return {"version": info["version"], "source": "GET /info"}
    hdr = (headers or {}).get("server") or (headers or {}).get("Server")
    return {"version": None, "reason": "the server offers no version (GET /version, /props, /info "
                                       f"gave none; Server header: {hdr or 'absent'})"}


def describe_sut(base_url: str, models: dict, managed: Optional[dict], model: Optional[str],
                 endpoint: str, self_described: Optional[dict] = None,
                 accelerators: Optional[int] = None) -> dict:
    own = self_described or {}
    return Sut.dump({  # analysis.contract: every key named there, schema_version set
            "target_url": base_url, "endpoint": endpoint, "model": model,
            "models": models.get("models"), "models_status": models.get("status"),
            "models_error": models.get("error"), "response_headers": models.get("headers"),
            "managed_server": managed,
            "server_info": (managed or {}).get("info") or own.get("info"),
            "server_version": server_version(own, models.get("headers")),
            "server_props": ({k: own["props"].get(k) for k in PROPS_KEEP}
                             if isinstance(own.get("props"), dict) else None),
            "client_host": client_host(), "accelerators": accelerators})
