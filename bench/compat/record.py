"""Record each real server's answers, byte for byte, as small JSON fixtures for CI replay.

    for server in --servers:  servers.Server(name) started on 127.0.0.1 (bench/compat/servers.py)
        for case in CASES:  a fresh raw socket (bench/compat/wire.py) ─► one request ─► Exchange
                            ─► after_body(1 s): did the server close the socket after the answer?
            "keepalive-reuse": two streamed requests on ONE socket; what the second one got
        ─► tests/fixtures/servers/<server>/<case>.json
               {server, version, case, request{method, path, headers, body},
                response{status, reason, headers[[k, v]] (wire order), framing,
                         chunks[{t_ms, text | b64}] (the server's writes / reads), reads[[t_ms, n]]},
                connection{closed_by_server, closed_after_ms}, error}
           tests/fixtures/servers/<server>/_server.json  {name, version, argv, model, recorded_at}
    ─► tests/fixtures/servers/README.md  (versions, the regenerating command)

The request bodies are loadgen's own (loadgen/client/request.py): the headers it sends, stream,
stream_options.include_usage, ignore_eos, plus the fields servers disagree on (min_tokens,
continuous_usage_stats, an unknown field). max_tokens is small so fixtures stay small.

vLLM also answers what goes beyond text (VARIANT_CASES), each on the start that serves it
(bench/compat/servers.py VLLM_VARIANTS): generate (the default start: Responses API), tools (tool calls
required / named / auto, json_schema), embed (embeddings: a list of 4 texts, one text), vision (chat with one 64x48 PNG
made by loadgen's own image code) ─► the same directory; _server.json ``variants`` gives each
start's argv and cases.

Run: ``python -m bench.compat.record [--servers vllm,llama.cpp,transformers]``
     ``python -m bench.compat.record --vllm-variants generate,embed,vision``  (only those cases)
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path

from bench.compat import servers, wire
from bench.compat.paths import REPO

OUT = REPO / "tests" / "fixtures" / "servers"
PROMPT = "the of and to in is was he for it with as his on be at by had are but from"
MAX_TOKENS = 8
SPECIAL_ID = 3      # "<|user|>" in bench/compat/models.py's tokenizer (SPECIAL[3])
SSE = {"Accept": "text/event-stream"}
USAGE = {"stream_options": {"include_usage": True}}
LOADGEN = {"stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}


def _comp(**kw) -> dict:
    return {"prompt": PROMPT, "max_tokens": MAX_TOKENS, **kw}


def _chat(**kw) -> dict:
    return {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": MAX_TOKENS, **kw}


C, CH = "/v1/completions", "/v1/chat/completions"
# name: (method, path, body or None, extra headers)
CASES: dict[str, tuple] = {
    "models": ("GET", "/v1/models", None, {}),
    "health": ("GET", "/health", None, {}),
    "version": ("GET", "/version", None, {}),
    "metrics": ("GET", "/metrics", None, {}),
    "props": ("GET", "/props", None, {}),         # llama.cpp: build_info (its version), slots
    "completions": ("POST", C, _comp(stream=False), {}),
    "completions-stream": ("POST", C, _comp(stream=True), SSE),
    "completions-stream-usage": ("POST", C, _comp(stream=True, **USAGE), SSE),
    "completions-stream-loadgen": ("POST", C, _comp(**LOADGEN), SSE),
    "completions-ignore-eos": ("POST", C, _comp(stream=False, ignore_eos=True), {}),
    "chat": ("POST", CH, _chat(stream=False), {}),
    "chat-stream": ("POST", CH, _chat(stream=True), SSE),
    "chat-stream-usage": ("POST", CH, _chat(stream=True, **USAGE), SSE),
    "chat-stream-loadgen": ("POST", CH, _chat(**LOADGEN), SSE),
    "chat-stream-continuous-usage": ("POST", CH, _chat(stream=True, stream_options={
        "include_usage": True, "continuous_usage_stats": True}), SSE),
    "chat-stream-min-tokens": ("POST", CH, _chat(stream=True, min_tokens=4, **USAGE), SSE),
    "chat-stream-unknown-field": ("POST", CH, _chat(stream=True, loadgen_unknown_field=1, **USAGE), SSE),
    # every token forced to a special token (<|user|>, id 3: not an end-of-generation token anywhere):
    # how does a token that renders as no text stream, and does usage still count it?
    "chat-stream-special-tokens": ("POST", CH, _chat(stream=True, logit_bias={str(SPECIAL_ID): 100.0}, **USAGE),
                                   SSE),
    # the same with an integer bias: transformers serve answers 200 and then an SSE error event
    "chat-stream-logit-bias-int": ("POST", CH, _chat(stream=True, logit_bias={str(SPECIAL_ID): 100}, **USAGE), SSE),
}
REUSE = "keepalive-reuse"   # two loadgen-style streamed completions on one connection

# --- the endpoints and request shapes beyond text chat/completions (vLLM: one start per variant) ---
TOOL_TOKENS = 128           # room for a whole tool call / JSON answer (they end before max_tokens)
CITIES = ["Paris", "Oslo"]
# strict: vLLM 0.32 (--tool-strict-level auto) pins the arguments to ``parameters`` only for a
# strict tool; else they are any JSON ("arguments": true from random weights)
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": CITIES}},
                   "required": ["city"], "additionalProperties": False}}}]
JSON_SCHEMA = {"type": "json_schema", "json_schema": {
    "name": "forecast", "strict": True,
    "schema": {"type": "object", "properties": {"city": {"type": "string", "enum": CITIES},
                                                "rain": {"type": "boolean"}},
               "required": ["city", "rain"], "additionalProperties": False}}}
TOOLED = {"stream": True, "stream_options": {"include_usage": True}}      # loadgen's body, ignore_eos off
EMBED_INPUTS = [PROMPT, "and the of in to", "was he for it with as his", "on be at by had are but from"]
IMAGE = dict(width=64, height=48, fmt="png", seed=0)


def image_url(k: int = 0) -> str:
    """Image ``k`` of loadgen's own seeded pool (loadgen.scenario.images), as a data URL."""
    from loadgen.scenario.images import data_url, make_image
    return data_url(make_image(IMAGE["seed"], k, IMAGE["width"], IMAGE["height"], IMAGE["fmt"]), IMAGE["fmt"])


def _chat_images(n: int, **kw) -> dict:
    parts = [{"type": "text", "text": PROMPT}] + [{"type": "image_url", "image_url": {"url": image_url(k)}}
                                                  for k in range(n)]
    return {"messages": [{"role": "user", "content": parts}], "max_tokens": MAX_TOKENS, **kw}


R, E = "/v1/responses", "/v1/embeddings"
SPEC_PROMPT = " ".join([PROMPT] * 4)
SPEC_TOKENS = 64
SPEC_FORCED = 300   # a plain word piece of bench/compat/models.py's tokenizer (not special)
NAMED = {"type": "function", "function": {"name": "get_weather"}}
# variant (bench/compat/servers.py VLLM_VARIANTS) ─► cases recorded against that start
VARIANT_CASES: dict[str, dict[str, tuple]] = {
    "generate": {
        "responses": ("POST", R, {"input": PROMPT, "max_output_tokens": MAX_TOKENS, "stream": False}, {}),
        "responses-stream-loadgen": ("POST", R, {"input": PROMPT, "max_output_tokens": MAX_TOKENS, "stream": True,
                                                 "ignore_eos": True}, SSE),
    },
    "tools": {
        "chat-stream-tools-required": ("POST", CH, _chat(**TOOLED, tools=TOOLS, tool_choice="required",
                                                         max_tokens=TOOL_TOKENS), SSE),
        "chat-stream-tools-named": ("POST", CH, _chat(**TOOLED, tools=TOOLS, tool_choice=NAMED,
                                                      max_tokens=TOOL_TOKENS), SSE),
        "chat-stream-tools-auto": ("POST", CH, _chat(**TOOLED, tools=TOOLS, tool_choice="auto"), SSE),
        "chat-tools-required": ("POST", CH, _chat(stream=False, tools=TOOLS, tool_choice="required",
                                                  max_tokens=TOOL_TOKENS), {}),
        "chat-stream-json-schema": ("POST", CH, _chat(**TOOLED, response_format=JSON_SCHEMA,
                                                      max_tokens=TOOL_TOKENS), SSE),
    },
    "embed": {
        "embeddings": ("POST", E, {"input": EMBED_INPUTS}, {}),
        "embeddings-one": ("POST", E, {"input": PROMPT}, {}),
    },
    "vision": {
        "chat-stream-images-loadgen": ("POST", CH, _chat_images(1, **LOADGEN), SSE),
        "chat-images": ("POST", CH, _chat_images(1, stream=False), {}),
    },
    # n-gram speculation: a repetitive prompt and greedy decoding (a random-weight model falls into
    # a loop, which the prompt lookup then drafts from), then the counters
    "spec": {
        "spec-completions-stream-loadgen": ("POST", C, _comp(**LOADGEN, prompt=SPEC_PROMPT, max_tokens=SPEC_TOKENS,
                                                             temperature=0), SSE),
        "spec-chat-stream-loadgen": ("POST", CH, {"messages": [{"role": "user", "content": SPEC_PROMPT}],
                                                  "max_tokens": SPEC_TOKENS, "temperature": 0, **LOADGEN}, SSE),
        # usage in every chunk: the tokens each chunk carried (a verification step's accepted drafts + 1)
        "spec-completions-stream-continuous-usage": ("POST", C, _comp(**{
            **LOADGEN, "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
            prompt=SPEC_PROMPT, max_tokens=SPEC_TOKENS, temperature=0), SSE),
        # logit_bias with speculation: vLLM 0.32 answers 200, then an SSE error event (code 400: "not yet
        # supported with speculative decoding")
        "spec-completions-stream-forced": ("POST", C, _comp(**LOADGEN, prompt=SPEC_PROMPT, max_tokens=SPEC_TOKENS,
                                                            temperature=0, logit_bias={str(SPEC_FORCED): 100.0}),
                                           SSE),
        "spec-metrics": ("GET", "/metrics", None, {}),
    },
    # two LoRA adapters served beside the base model: the listing, one stream each, a name not served
    "lora": {
        "lora-models": ("GET", "/v1/models", None, {}),
        "lora-a-completions-stream-loadgen": ("POST", C, _comp(**LOADGEN, model="a"), SSE),
        "lora-b-completions-stream-loadgen": ("POST", C, _comp(**LOADGEN, model="b"), SSE),
        "lora-unknown-model": ("POST", C, _comp(**LOADGEN, model="c"), SSE),
    },
}


def _piece(c: dict) -> dict:
    try:
        return {"t_ms": c["t_ms"], "text": c["data"].decode("utf-8")}
    except UnicodeDecodeError:
        return {"t_ms": c["t_ms"], "b64": base64.b64encode(c["data"]).decode()}


def _response(ex: wire.Exchange) -> dict:
    return {"status": ex.status, "reason": ex.reason, "headers": ex.headers, "framing": ex.framing,
            "chunks": [_piece(c) for c in ex.chunks], "reads": ex.reads}


def _request(method: str, path: str, body, headers: dict, model: str) -> dict:
    if body is not None:
        body = {"model": model, **body}
    return {"method": method, "path": path, "headers": headers, "body": body}


def record_case(s: servers.Server, name: str, cases: dict = CASES) -> dict:
    method, path, body, headers = cases[name]
    req = _request(method, path, body, headers, s.model)
    conn = wire.Conn(s.port)
    try:
        ex = conn.exchange(method, path, req["body"], headers)
        closing = conn.after_body(1.0) if ex.error is None else {"closed_by_server": None}
    finally:
        conn.close()
    out = {"server": s.name, "version": s.version, "case": name, "request": req, "response": _response(ex),
           "connection": closing, "error": ex.error}
    if s.variant != "generate":
        out["variant"] = s.variant
    return out


def record_reuse(s: servers.Server) -> dict:
    """Two streamed requests on one socket, the second sent right after the first answer ended."""
    req = _request("POST", C, _comp(**LOADGEN), SSE, s.model)
    conn = wire.Conn(s.port)
    out = {"server": s.name, "version": s.version, "case": REUSE, "request": req, "exchanges": []}
    try:
        for _ in range(2):
            if conn.eof:
                out["exchanges"].append({"skipped": "server closed the connection"})
                break
            ex = conn.exchange("POST", C, req["body"], SSE)
            out["exchanges"].append({"response": _response(ex), "error": ex.error})
            if ex.error:
                break
    finally:
        conn.close()
    first = out["exchanges"][0]
    out["response"], out["error"] = first["response"], first["error"]
    second = out["exchanges"][1] if len(out["exchanges"]) > 1 else {}
    out["connection"] = {"second_request_on_same_socket": (
        "ok" if second.get("response", {}).get("status") == 200 and not second.get("error")
        else second.get("error") or second.get("skipped") or f"status {second.get('response', {}).get('status')}")}
    return out


def _home(argv: list) -> list:
    return [a.replace(str(Path.home()), "~") for a in argv]


def _write(d: Path, name: str, rec: dict, t0: float) -> None:
    (d / f"{name}.json").write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
    print(f"  {rec['server']} {name}: {rec['response']['status']} {rec['connection']} "
          f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)


def record_server(name: str, out: Path = OUT, variants: tuple = tuple(VARIANT_CASES)) -> dict:
    """Every case of ``name`` (CASES + keepalive-reuse on its default start); for vLLM also each
    of ``variants``' cases on that variant's own start (``generate``'s on the default one)."""
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    with servers.Server(name) as s:
        meta = {"name": name, "version": s.version, "argv": _home(s.argv),
                "model": Path(s.model).name if "/" in s.model else s.model, "startup_s": s.startup_s,
                "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cases": []}
        for case in list(CASES) + [REUSE]:
            t0 = time.monotonic()
            rec = record_reuse(s) if case == REUSE else record_case(s, case)
            _write(d, case, rec, t0)
            meta["cases"].append(case)
        if name == "vllm" and "generate" in variants:
            for case in VARIANT_CASES["generate"]:
                t0 = time.monotonic()
                _write(d, case, record_case(s, case, VARIANT_CASES["generate"]), t0)
                meta["cases"].append(case)
    if name == "vllm":       # variants not recorded now keep their last record
        old = json.loads((d / "_server.json").read_text()).get("variants", {}) if (d / "_server.json").exists() else {}
        meta["variants"] = {**{k: v for k, v in old.items() if k in VARIANT_CASES},
                            **record_variants(d, [v for v in variants if v != "generate"])}
    (d / "_server.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def record_variants(d: Path, variants: list) -> dict:
    """vLLM's other starts (a pooling model; a vision model): their cases, their argv."""
    out = {}
    for v in variants:
        try:
            out[v] = record_variant(d, v)
        except Exception as e:           # one variant that does not start: the others still record
            out[v] = {"error": f"{type(e).__name__}: {str(e)[:600]}"}
            print(f"  vllm {v}: FAILED: {str(e)[:300]}", file=sys.stderr)
    return out


def record_variant(d: Path, v: str) -> dict:
    """One variant's start and its cases."""
    with servers.Server("vllm", variant=v) as s:
        out = {"argv": _home(s.argv), "model": Path(s.model).name, "startup_s": s.startup_s, "cases": []}
        for case in VARIANT_CASES[v]:
            t0 = time.monotonic()
            _write(d, case, record_case(s, case, VARIANT_CASES[v]), t0)
            out["cases"].append(case)
    return out


def record_variant_only(variants: list, out: Path = OUT) -> dict:
    """Re-record only some vLLM variants' cases (the default start's cases are kept), updating
    _server.json's ``variants`` and ``cases``."""
    d = out / "vllm"
    meta = json.loads((d / "_server.json").read_text())
    if "generate" in variants:
        with servers.Server("vllm") as s:
            meta.update(version=s.version, argv=_home(s.argv), startup_s=s.startup_s)
            for case in VARIANT_CASES["generate"]:
                t0 = time.monotonic()
                _write(d, case, record_case(s, case, VARIANT_CASES["generate"]), t0)
                if case not in meta["cases"]:
                    meta["cases"].append(case)
    meta.setdefault("variants", {}).update(record_variants(d, [v for v in variants if v != "generate"]))
    (d / "_server.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def write_readme(out: Path = OUT) -> None:
    rows = []
    for f in sorted(out.glob("*/_server.json")):
        m = json.loads(f.read_text())
        rows.append(f"| {m['name']} | {m['version']} | `{' '.join(m['argv'])}` | {m['recorded_at']} |")
    more = "; ".join(f"{v}: {', '.join(c)}" for v, c in VARIANT_CASES.items())
    (out / "README.md").write_text(README.format(rows="\n".join(rows), cases=", ".join(list(CASES) + [REUSE]),
                                                 more=more))


README = """# Real servers' answers, recorded

Recorded by `python -m bench.compat.record` (bench/compat/record.py) against the real servers that
`python -m bench.compat.install` installs, on this project's 2-core CPU VM, with the random-weight
models of `bench/compat/models.py` (JAX `small` shapes; nothing downloaded from a model hub). Replayed
in CI by `tests/support/replay_server.py` (same headers, same body bytes, same chunking, and the
server's close-after-answer).

| server | version | command (model paths under `~/.cache/loadgen-compat/`) | recorded |
|---|---|---|---|
{rows}

One file per case: `<server>/<case>.json` with `request` (method, path, headers, body: loadgen's
own fields), `response` (status, reason, headers in wire order, framing, `chunks` = the body as
the server wrote it — HTTP chunks when chunked — each with its arrival offset `t_ms` from the
request's send, `reads` = every socket read `[t_ms, bytes]`), `connection` (did the server close
the socket within 1 s of the answer's end) and `error` (a wire error, else null).
`keepalive-reuse` sends two streamed requests on one socket and records both exchanges.

Cases: {cases}.

vLLM only, each on the start that serves it (`_server.json` `variants`: generate = the default start,
tools = with `--enable-auto-tool-choice --tool-call-parser hermes` and xgrammar without whitespace, embed = `--runner pooling --convert embed`, vision = the BLIP-2-shaped
`small-vl`, spec = n-gram speculative decoding (`--speculative-config`), lora = `--enable-lora --lora-modules a=… b=…`
with two random-weight adapters made by bench/compat/lora.py): {more}.

Regenerate (installs and model making are cached in `$LOADGEN_COMPAT_CACHE`, default
`~/.cache/loadgen-compat/`):

    python -m bench.compat.install && python -m bench.compat.record --servers vllm,llama.cpp,transformers
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="record real servers' HTTP answers as CI fixtures")
    ap.add_argument("--servers", default=",".join(servers.NAMES))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--vllm-variants", default=None,
                    help=f"only these vLLM variants' cases ({', '.join(VARIANT_CASES)}); keeps the rest")
    a = ap.parse_args(argv)
    rc = 0
    if a.vllm_variants:
        m = record_variant_only([v.strip() for v in a.vllm_variants.split(",") if v.strip()], a.out)
        print(f"vllm {m['version']}: variants {', '.join(m['variants'])}", file=sys.stderr)
        write_readme(a.out)
        return 0
    for name in [x.strip() for x in a.servers.split(",") if x.strip()]:
        try:
            m = record_server(name, a.out)
            print(f"{name} {m['version']}: {len(m['cases'])} cases", file=sys.stderr)
        except Exception as e:
            print(f"{name}: FAILED: {e}", file=sys.stderr)
            rc = 1
    write_readme(a.out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
