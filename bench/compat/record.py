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

Run: ``python -m bench.compat.record [--servers vllm,llama.cpp,transformers]``
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


def record_case(s: servers.Server, name: str) -> dict:
    method, path, body, headers = CASES[name]
    req = _request(method, path, body, headers, s.model)
    conn = wire.Conn(s.port)
    try:
        ex = conn.exchange(method, path, req["body"], headers)
        closing = conn.after_body(1.0) if ex.error is None else {"closed_by_server": None}
    finally:
        conn.close()
    return {"server": s.name, "version": s.version, "case": name, "request": req, "response": _response(ex),
            "connection": closing, "error": ex.error}


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


def record_server(name: str, out: Path = OUT) -> dict:
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    with servers.Server(name) as s:
        meta = {"name": name, "version": s.version, "argv": [a.replace(str(Path.home()), "~") for a in s.argv],
                "model": Path(s.model).name if "/" in s.model else s.model, "startup_s": s.startup_s,
                "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cases": []}
        for case in list(CASES) + [REUSE]:
            t0 = time.monotonic()
            rec = record_reuse(s) if case == REUSE else record_case(s, case)
            (d / f"{case}.json").write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
            meta["cases"].append(case)
            print(f"  {name} {case}: {rec['response']['status']} {rec['connection']} "
                  f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    (d / "_server.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def write_readme(out: Path = OUT) -> None:
    rows = []
    for f in sorted(out.glob("*/_server.json")):
        m = json.loads(f.read_text())
        rows.append(f"| {m['name']} | {m['version']} | `{' '.join(m['argv'])}` | {m['recorded_at']} |")
    (out / "README.md").write_text(README.format(rows="\n".join(rows), cases=", ".join(list(CASES) + [REUSE])))


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

Regenerate (installs and model making are cached in `$LOADGEN_COMPAT_CACHE`, default
`~/.cache/loadgen-compat/`):

    python -m bench.compat.install && python -m bench.compat.record --servers vllm,llama.cpp,transformers
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="record real servers' HTTP answers as CI fixtures")
    ap.add_argument("--servers", default=",".join(servers.NAMES))
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    rc = 0
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
