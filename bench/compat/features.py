"""The compatibility matrix's runs beyond text (vLLM only): which server start, which request
shape, and what the records must show for it.

    FEATURE_RUNS name ─► (variant: servers.VLLM_VARIANTS, api fields, workload fields, check kind)
    feature_scenario(matrix.scenario, ...) ─► the scenario (concurrency 4, 12 requests, 1 warm-up)
    feature_check(kind, measured records, workload) ─► {ok: True | False | "explained", detail}
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from bench.compat import models, record

# vLLM only: the other endpoints and request shapes, each on its variant's start (servers.VLLM_VARIANTS).
# name: (variant, api fields, workload fields, feature check); concurrency 4, 12 requests, 1 warm-up
_TOOLED = {"endpoint": "chat", "stream": True, "include_usage": True, "ignore_eos": False}
FEATURE_RUNS: dict[str, tuple] = {
    "responses-stream-c4": ("generate", {"endpoint": "responses", "stream": True, "ignore_eos": True}, {},
                            "responses"),
    "responses-nostream-c4": ("generate", {"endpoint": "responses", "stream": False, "ignore_eos": True}, {},
                              "responses"),
    "tools-required-c4": ("tools", _TOOLED, {"tools": record.TOOLS, "tool_choice": "required"}, "tools"),
    "tools-named-c4": ("tools", _TOOLED, {"tools": record.TOOLS, "tool_choice": record.NAMED}, "tools"),
    "tools-auto-c4": ("tools", _TOOLED, {"tools": record.TOOLS, "tool_choice": "auto"}, "tools_auto"),
    "json-schema-c4": ("tools", {**_TOOLED, "response_format": record.JSON_SCHEMA}, {}, "json"),
    "embeddings-c4": ("embed", {"endpoint": "embeddings"}, {"inputs_per_request": 4}, "embeddings"),
    "images-stream-c4": ("vision", {"endpoint": "chat", "stream": True, "include_usage": True, "ignore_eos": True},
                         {"images": {"count": 1, "width": 64, "height": 48, "format": "png", "pool": 4}}, "images"),
    "images-nostream-c4": ("vision", {"endpoint": "chat", "stream": False, "ignore_eos": True},
                           {"images": {"count": 1, "width": 64, "height": 48, "format": "png", "pool": 4}},
                           "images"),
}
FEATURE_LOAD = {"mode": "concurrency", "concurrency": 4, "num_requests": 12}



def feature_scenario(base: Callable, name: str, url: str, api: dict, wl: dict, out: Path) -> dict:
    """A FEATURE_RUNS scenario: the text workload of ``base`` (matrix.scenario) with this run's api and
    workload fields (tool calls and JSON answers get TOOL_TOKENS of room; embeddings no output length)."""
    sc = base(name, url, api.get("endpoint", "chat"), api.get("stream", False), FEATURE_LOAD, out)
    sc["api"] = dict(api)
    sc["load"]["warmup_requests"] = 1
    if api.get("ignore_eos") is False:
        sc["workload"]["output_tokens"]["value"] = record.TOOL_TOKENS
    if api.get("endpoint") == "embeddings":
        del sc["workload"]["output_tokens"]
    sc["workload"].update(wl)
    return sc


def feature_check(kind: str, recs: list[dict], wl: dict, prompt_tokens: int, max_tokens: int) -> dict:
    """What the request shape must show in the ok records (FEATURE_RUNS' last field)."""
    ok_recs = [r for r in recs if r.get("status") == "ok"]
    if not ok_recs:
        return {"ok": False, "detail": "no ok record"}
    vals = lambda k: sorted({str(r.get(k)) for r in ok_recs})   # noqa: E731
    if kind == "embeddings":
        n = wl.get("inputs_per_request", 1)
        good = all(r.get("inputs") == n and r.get("prompt_tokens") for r in ok_recs)
        return {"ok": good, "detail": f"inputs {vals('inputs')}, prompt tokens {vals('prompt_tokens')[:3]} (usage)"}
    if kind == "images":
        n = wl["images"]["count"]
        extra = sorted({r["prompt_tokens"] - prompt_tokens for r in ok_recs if r.get("prompt_tokens")})
        good = all(r.get("input_images") == n and r.get("prompt_tokens_source") == "usage" for r in ok_recs) \
            and len(extra) == 1 and extra[0] >= n * models.image_tokens()   # BLIP-2: its Q-Former queries
        return {"ok": good, "detail": f"input_images {vals('input_images')}; usage prompt tokens − text "
                                      f"{extra} (≥ {n}×{models.image_tokens()} image tokens + the chat template's)"}
    if kind in ("tools", "tools_auto"):
        calls = [r.get("tool_calls") for r in ok_recs]
        valid = [r.get("tool_args_valid") for r in ok_recs]
        if kind == "tools_auto":          # random weights: the parser finds no call; every record says 0
            return {"ok": all(c is not None for c in calls), "detail": f"tool_calls {sorted(set(map(str, calls)))}"}
        errs = sorted({r.get("structured_error") for r in ok_recs if r.get("structured_error")})[:2]
        # random weights put random whitespace inside a call (the structural tag allows it), and with
        # required a second call may follow: a final call cut by max_tokens does not parse; loadgen
        # says so, which is right
        cut = [r for r in ok_recs if r.get("tool_args_parsed") is False and r.get("finish_reason") == "length"]
        ok = all((c or 0) >= 1 for c in calls) and all(v is True or r in cut for v, r in zip(valid, ok_recs))
        detail = (f"tool_calls {sorted(set(map(str, calls)))}; args valid {valid.count(True)} of {len(valid)}"
                  + (f", {len(cut)} cut at max_tokens (not JSON)" if cut else "") + (f"; {errs}" if errs else ""))
        return {"ok": ("explained" if cut else True) if ok else False, "detail": detail}
    if kind == "json":
        errs = sorted({r.get("structured_error") for r in ok_recs if r.get("structured_error")})[:2]
        return {"ok": all(r.get("json_valid") is True for r in ok_recs),
                "detail": f"json_valid {vals('json_valid')}" + (f"; {errs}" if errs else "")}
    if kind == "responses":
        return {"ok": all(r.get("output_tokens") == max_tokens for r in ok_recs),
                "detail": f"output tokens {vals('output_tokens')} ({vals('output_tokens_source')})"}
    raise ValueError(kind)
