"""The compatibility matrix: each real server, driven by the real `loadgen run` CLI, judged from its files.

    for server in --servers (one at a time; 2 cores):
        servers.Server(name) on 127.0.0.1 ─► url, model, version
        for run in RUNS (completions | chat) × (stream | not) × (concurrency 1 | 8) + a Poisson server run:
            scenario YAML in <cache>/matrix-runs/<time>/ ─► subprocess: python -m loadgen run SCENARIO --json
                                           (bounded: num_requests 16–32, max_tokens 32, timeout)
            ─► its run dir (kept, under that folder's runs/): summary.json, records.jsonl, sut.json,
               server_metrics.jsonl
            ─► checks: exit code | 0 failed | output tokens == max_tokens (where ignore_eos is honoured)
                       | token-count mismatches 0 (or explained) | server version in sut.json
                       | /metrics scraped (where the server has one)
        stop the server (process group)
        vLLM also: FEATURE_RUNS (features.py) — Responses API on the default start; tools (required / named / auto)
            and json_schema on the tools start; embeddings on the pooling start; images on the
            BLIP-2 start (servers.VLLM_VARIANTS) ─► the same checks + a "request shape" check
            (inputs, input_images and image tokens in usage, tool calls and their arguments' validity,
            json_valid, output tokens)
    ─► docs/compatibility.md + compatibility.json (server, version, each check, pass/fail,
       concurrency-1 TTFT/TPOT p50 as loadgen measured them, the regenerating command)

Prompts: 64 tokens of loadgen's common words counted with the models' own tokenizer.json (exact).

Run: ``python -m bench.compat.matrix [--servers vllm,llama.cpp,transformers] [--quick] [--merge]``
(``--merge``: rerun some servers, keep the others' last results; with ``--runs`` also keep these servers'
runs not named; ``--render JSON``: only rewrite the .md)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Optional

from bench.compat import models, record, servers
from bench.compat.features import FEATURE_RUNS, feature_check, feature_scenario
from bench.compat.paths import REPO, cache_dir
from bench.compat.run_cli import run_loadgen
from bench.compat.served import compat_section      # speculative decoding, LoRA (their own starts)

HERE = Path(__file__).resolve().parent
MAX_TOKENS, PROMPT_TOKENS = 32, 64
# name: (endpoint, stream, load)
RUNS: dict[str, tuple] = {
    "completions-stream-c1": ("completions", True, {"mode": "concurrency", "concurrency": 1, "num_requests": 16}),
    "completions-stream-c8": ("completions", True, {"mode": "concurrency", "concurrency": 8, "num_requests": 32}),
    "completions-nostream-c8": ("completions", False, {"mode": "concurrency", "concurrency": 8, "num_requests": 16}),
    "chat-stream-c1": ("chat", True, {"mode": "concurrency", "concurrency": 1, "num_requests": 16}),
    "chat-stream-c8": ("chat", True, {"mode": "concurrency", "concurrency": 8, "num_requests": 32}),
    "chat-nostream-c8": ("chat", False, {"mode": "concurrency", "concurrency": 8, "num_requests": 16}),
    "completions-stream-poisson": ("completions", True, {"mode": "server", "arrival": "poisson", "rate": 1.0,
                                                         "num_requests": 24}),
}
QUICK = ("completions-stream-c1", "chat-stream-c8")


def scenario(name: str, url: str, endpoint: str, stream: bool, load: dict, out: Path) -> dict:
    return {
        "name": f"compat-{name}",
        "target": {"url": url},
        "api": {"endpoint": endpoint, "stream": stream, "ignore_eos": True, "include_usage": True},
        "workload": {"prompt_tokens": {"dist": "fixed", "value": PROMPT_TOKENS},
                     "output_tokens": {"dist": "fixed", "value": MAX_TOKENS},
                     "tokenizer": str(models.hf_dir() / "tokenizer.json"), "seed": 0},
        "load": {"warmup_requests": 2, **load},
        "output": {"dir": str(out), "report": "none"},
    }


def _jsonl(p: Path) -> list[dict]:
    if not p.exists():
        return []
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]


def _get(d: dict, *keys, default=None):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


FIXTURES = REPO / "tests" / "fixtures" / "servers"


def silent_special_tokens(name: str) -> Optional[str]:
    """How the recorded server streams tokens that render as no text (its chat-stream-special-tokens
    transcript: 8 forced special tokens), or None when nothing was recorded."""
    f = FIXTURES / name / "chat-stream-special-tokens.json"
    if not f.exists():
        return None
    ch = json.loads(f.read_text())["response"]["chunks"]
    body = "".join(c.get("text", "") for c in ch)
    events = [json.loads(e[6:]) for e in body.split("\n\n") if e.startswith("data: {")]
    deltas = [c.get("delta", {}) for o in events for c in o.get("choices", [])]
    empty = sum(1 for d in deltas if d.get("content") == "" and "role" not in d)
    if any(d.get("content") for d in deltas):
        return None
    return (f"special tokens stream as {empty} chunks with content \"\"" if empty
            else "special tokens stream no chunk at all") + " while usage counts them (tests/fixtures/servers/" \
        f"{name}/chat-stream-special-tokens.json)"


def judge(server: servers.Server, res: dict) -> dict:
    """The checks of one run, each {ok: True | False | None (n/a), detail}."""
    checks: dict = {"exit": {"ok": res["rc"] == 0, "detail": f"rc {res['rc']}"}}
    rd = Path(res["run_dir"]) if res["run_dir"] else None
    summary = json.loads((rd / "summary.json").read_text()) if rd and (rd / "summary.json").exists() else {}
    sut = json.loads((rd / "sut.json").read_text()) if rd and (rd / "sut.json").exists() else {}
    recs = [r for r in _jsonl(rd / "records.jsonl") if r.get("phase", "measured") == "measured"] if rd else []
    res["summary"] = {k: summary.get(k) for k in ("requests_completed", "requests_failed", "duration_s",
                                                  "output_throughput", "failures_by_kind", "token_counts",
                                                  "warnings", "dropped_fields")}
    res["ttft_p50_ms"] = _get(summary, "ttft_ms", "p50")
    res["tpot_p50_ms"] = _get(summary, "tpot_ms", "p50")
    failed = summary.get("requests_failed")
    kinds = summary.get("failures_by_kind") or {}
    errs = sorted({(r.get("error") or "")[:120] for r in recs if r.get("status") != "ok"})[:3]
    retried = sum(1 for r in recs if r.get("retries"))
    checks["no_failures"] = {"ok": failed == 0 and bool(summary),
                             "detail": f"{failed} failed of {len(recs)} {kinds or ''} {errs or ''}".strip(),
                             "note": f"{retried} retried" if retried else ""}
    body_fields = json.dumps(summary.get("dropped_fields") or summary.get("warnings") or "")
    ok_recs = [r for r in recs if r.get("status") == "ok"]
    outs = [r.get("output_tokens") for r in ok_recs]
    short = [o for o in outs if o != MAX_TOKENS]
    if "ignore_eos" in body_fields:
        checks["output_eq_max_tokens"] = {"ok": None, "detail": f"ignore_eos dropped by loadgen "
                                                                f"({len(short)} of {len(outs)} short)"}
    else:
        checks["output_eq_max_tokens"] = {"ok": bool(outs) and not short,
                                          "detail": f"{len(outs) - len(short)} of {len(outs)} = {MAX_TOKENS}"
                                                    + (f"; others {sorted(set(map(str, short)))[:5]}" if short else "")}
    tc = summary.get("token_counts") or {}
    mism = tc.get("mismatch_count")
    srcs = tc.get("output_tokens_source")
    detail = (f"{mism} of {tc.get('with_both_counts')} (usage {tc.get('usage_output_tokens_total')} vs chunks "
              f"{tc.get('chunk_output_tokens_total')}; output counted from {srcs})") if tc else "no token_counts"
    bad = [r for r in ok_recs if r.get("token_count_mismatch")]
    if bad:
        detail += "; e.g. " + ", ".join(f"#{r['id']} usage {r.get('usage_output_tokens')} chunks "
                                        f"{r.get('chunk_output_tokens')} in {len(r.get('chunks') or [])} chunks"
                                        for r in bad[:2])
    ok = mism == 0 if mism is not None else None
    why = silent_special_tokens(server.name)
    if bad and why and all((r.get("chunk_output_tokens") or 0) < (r.get("usage_output_tokens") or 0) for r in bad):
        ok, detail = "explained", f"{detail}. Explained: fewer chunk tokens than usage; {why}"
    checks["token_count_mismatches"] = {"ok": ok, "detail": detail}
    text = json.dumps(sut)
    # "0.32.0" | "0.5.0-dev (build 1, commit 0c1e570)" (its /props says build_info b1-0c1e570) | "5.24.0 torch ..."
    keys = [k for k in re.findall(r"[0-9][0-9a-z.+-]*[0-9a-z]", server.version.split(" torch")[0]) if len(k) > 2]
    hit = [k for k in keys if k in text]
    sv = sut.get("server_version") if isinstance(sut.get("server_version"), dict) else {}
    if hit:
        checks["version_in_sut"] = {"ok": True, "detail": f"found {hit[0]!r} ({sv.get('source')})"}
    elif sv.get("version") is None and sv.get("reason"):
        # the server exposes no version at all: loadgen records it as missing, with the reason
        checks["version_in_sut"] = {"ok": "n/a", "detail": f"recorded as missing: {sv['reason']}"}
    else:
        checks["version_in_sut"] = {"ok": False, "detail": f"none of {keys} in sut.json "
                                                          f"(server_version: {sv!r})"}
    if server.has_metrics:
        lines = _jsonl(rd / "server_metrics.jsonl") if rd else []
        checks["metrics_scraped"] = {"ok": len(lines) > 0, "detail": f"{len(lines)} scrapes"}
    else:
        checks["metrics_scraped"] = {"ok": None, "detail": "server has no /metrics"}
    return checks


def run_features(name: str, variant: str, runs: list[str], tmp: Path, out: dict) -> None:
    """FEATURE_RUNS of one vLLM variant on its own start (the default start's are run by run_server)."""
    with servers.Server(name, variant=variant) as s:
        out.setdefault("variants", {})[variant] = {"argv": s.argv, "startup_s": s.startup_s, "model": s.model}
        out["version"] = out["version"] or s.version
        run_each(s, runs, tmp, out)


def run_each(s: servers.Server, runs: list[str], tmp: Path, out: dict) -> None:
    for rn in runs:
        if rn in RUNS:
            endpoint, stream, load = RUNS[rn]
            sc, kind = scenario(f"{s.name}-{rn}", s.url, endpoint, stream, load, tmp / "runs"), None
        else:
            _, api, wl, kind = FEATURE_RUNS[rn]
            sc = feature_scenario(scenario, f"{s.name}-{rn}", s.url, api, wl, tmp / "runs")
        load0 = os.getloadavg()[0]
        res = run_loadgen(sc, tmp)
        res["loadavg_1m"] = [round(load0, 2), round(os.getloadavg()[0], 2)]   # a shared machine?
        res["checks"] = judge(s, res)
        if kind is not None:
            rd = Path(res["run_dir"]) if res["run_dir"] else None
            recs = [r for r in _jsonl(rd / "records.jsonl") if r.get("phase", "measured") == "measured"] if rd else []
            res["checks"]["feature"] = feature_check(kind, recs, sc["workload"], PROMPT_TOKENS, MAX_TOKENS)
            if kind in ("tools", "json") and res["checks"]["token_count_mismatches"]["ok"] is False:
                # a tool call's arguments stream in fewer pieces than tokens, and vLLM streams
                # nothing of what follows the call; a JSON answer's end-of-text token has no text
                res["checks"]["token_count_mismatches"]["ok"] = "explained"
                res["checks"]["token_count_mismatches"]["detail"] += (
                    ". Explained: structured output streams fewer pieces than usage counts tokens")
            if sc["api"].get("ignore_eos") is not True or sc["api"]["endpoint"] == "embeddings":
                res["checks"]["output_eq_max_tokens"] = {"ok": None, "detail": "no ignore_eos: answers end "
                                                         "when complete" if sc["api"]["endpoint"] != "embeddings"
                                                         else "embeddings: nothing generated"}
        res["pass"] = all(c["ok"] is not False for c in res["checks"].values())
        out["runs"][rn] = res
        bad = [k for k, c in res["checks"].items() if c["ok"] is False]
        print(f"  {s.name} {rn}: {'PASS' if res['pass'] else 'FAIL ' + ','.join(bad)} "
              f"({res['wall_s']} s)", file=sys.stderr, flush=True)


def run_server(name: str, runs: list[str], tmp: Path) -> dict:
    """RUNS (and vLLM's generate FEATURE_RUNS) on the server's default start; for vLLM then each
    other variant's FEATURE_RUNS on its own start (one server at a time)."""
    out = {"server": name, "runs": {}, "version": None, "error": None}
    t0 = time.monotonic()
    default = [rn for rn in runs if rn in RUNS or (name == "vllm" and FEATURE_RUNS[rn][0] == "generate")]
    try:
        if default:
            with servers.Server(name) as s:
                out.update(version=s.version, startup_s=s.startup_s, url_model=s.model, argv=s.argv)
                run_each(s, default, tmp, out)
                if s.proc.poll() is not None:
                    out["error"] = f"server exited with {s.proc.returncode} during the runs"
        if name == "vllm":
            for variant in ("tools", "embed", "vision"):
                mine = [rn for rn in runs if rn in FEATURE_RUNS and FEATURE_RUNS[rn][0] == variant]
                if mine:
                    run_features(name, variant, mine, tmp, out)
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {str(e)[:1500]}"
    out["total_s"] = round(time.monotonic() - t0, 1)
    return out


def _cell(c: Optional[dict]) -> str:
    if c is None:
        return "—"
    mark = {True: "pass", False: "**FAIL**", None: "n/a", "n/a": "n/a", "explained": "explained"}[c["ok"]]
    if c["ok"] == "explained":          # "3 of 16 (usage ...)": the count here, the reason below the table
        return f"explained ({c['detail'].split(' (')[0]})"
    if c["ok"] is True:
        return f"pass ({c['note']})" if c.get("note") else "pass"
    return f"{mark} ({c['detail']})"


KEEP = "<!-- hand-written sections below: bench.compat.matrix keeps them -->"


def write_md(results: list[dict], cmd: str, path: Path) -> None:
    L = ["# Compatibility matrix: loadgen against real servers", "",
         f"Measured on this project's 2-core CPU VM (no GPU), {time.strftime('%Y-%m-%d')}; evidence: measured.",
         "Every server runs a random-weight model with the JAX `small` shapes (bench/compat/models.py); "
         f"prompts {PROMPT_TOKENS} tokens (exact, the model's tokenizer), max_tokens {MAX_TOKENS}, "
         "`ignore_eos: true`, `include_usage: true`, 2 warm-up requests per run. The runs beyond text "
         "(vLLM only, `FEATURE_RUNS`): concurrency 4, 12 requests, 1 warm-up; tools and json_schema without "
         f"`ignore_eos` and max_tokens {record.TOOL_TOKENS} (the tool is `strict`, its city an enum; the schema "
         "a city enum and a boolean); embeddings 4 inputs per request; images one 64×48 PNG per request "
         "(loadgen's `workload.images`).", "",
         "The machine may be shared with other work while this runs: the last column gives the 1-minute "
         "load average before → after each run (— where not recorded); on 2 cores, anything above ~2 "
         "inflates TTFT/TPOT. Run directories are kept under `~/.cache/loadgen-compat/matrix-runs/`.", "",
         f"Regenerate: `{cmd}`", "",
         "| server | version | run | result | failed | out = max_tokens | token-count mismatches | version in sut.json "
         "| /metrics scraped | request shape | TTFT p50 ms | TPOT p50 ms | load avg 1 min (start → end) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.get("error") and not r["runs"]:
            L.append(f"| {r['server']} | {r.get('version') or '—'} | — | **did not start**: "
                     f"{r['error'][:300].replace('|', '/').replace(chr(10), ' ')} | | | | | | | | | |")
            continue
        for rn, res in r["runs"].items():
            c = res["checks"]
            f = lambda v: f"{v:.1f}" if isinstance(v, (int, float)) else "—"   # noqa: E731
            L.append(f"| {r['server']} | {r['version']} | {rn} | {'PASS' if res['pass'] else '**FAIL**'}"
                     f"{'' if res['checks']['exit']['ok'] else ' (exit ' + str(res['rc']) + ')'} "
                     f"| {_cell(c['no_failures'])} | {_cell(c['output_eq_max_tokens'])} "
                     f"| {_cell(c['token_count_mismatches'])} | {_cell(c['version_in_sut'])} "
                     f"| {_cell(c['metrics_scraped'])} | {_cell(c.get('feature'))} "
                     f"| {f(res['ttft_p50_ms'])} | {f(res['tpot_p50_ms'])} "
                     f"| {' → '.join(map(str, res.get('loadavg_1m') or [])) or '—'} |")
        if r.get("error"):
            L.append(f"| {r['server']} | | (server) | **{r['error'][:200]}** | | | | | | | | | |")
    starts = [(r["server"], "default", r.get("argv")) for r in results if r.get("variants") and r.get("argv")] + [
        (r["server"], v, x.get("argv")) for r in results for v, x in (r.get("variants") or {}).items()]
    if starts:
        home = str(Path.home())
        L += ["", "Server starts of the runs beyond text (vLLM: `FEATURE_RUNS`, one start per variant; models "
              "in bench/compat/models.py — `small-hf` the Llama above, as an embedding model through "
              "`--convert embed`; `small-vl` BLIP-2 shapes: that Llama, a 2-layer vision tower on 64×64 "
              "pixels and a 2-layer Q-Former, 16 image tokens per image; dummy weights):", ""]
        L += [f"- {n} {v}: `{' '.join(map(str, argv)).replace(home, '~')}`" for n, v, argv in starts if argv]
    L += ["", "## Concurrency 1, as loadgen measured it (streaming)", "",
          "| server | version | start-up s | completions TTFT p50 ms | completions TPOT p50 ms "
          "| chat TTFT p50 ms | chat TPOT p50 ms |", "|---|---|---|---|---|---|---|"]
    for r in results:
        g = lambda rn, k: _get(r, "runs", rn, k)   # noqa: E731
        f = lambda v: f"{v:.1f}" if isinstance(v, (int, float)) else "—"   # noqa: E731
        L.append(f"| {r['server']} | {r.get('version') or '—'} | {r.get('startup_s', '—')} "
                 f"| {f(g('completions-stream-c1', 'ttft_p50_ms'))} | {f(g('completions-stream-c1', 'tpot_p50_ms'))} "
                 f"| {f(g('chat-stream-c1', 'ttft_p50_ms'))} | {f(g('chat-stream-c1', 'tpot_p50_ms'))} |")
    L += ["", "Checks: *failed* = summary.json `requests_failed` is 0 (*n retried*: measured records whose "
          "`retries` > 0, i.e. loadgen retried them once on a fresh connection); *out = max_tokens* = every ok record's "
          "usage completion_tokens equals max_tokens (n/a where loadgen dropped `ignore_eos` because the "
          "server rejects it); *token-count mismatches* = summary.json `token_counts` (explained: every "
          "mismatched record has fewer chunk tokens than usage, and the server's recorded transcript shows "
          "special tokens streaming as no text while usage counts them); *version in sut.json* = "
          "the server's version string appears in sut.json (n/a: the server exposes none — no /version, "
          "/props or /info — and sut.json says so); */metrics scraped* = server_metrics.jsonl has "
          "lines (n/a: the server has no /metrics); *request shape* (FEATURE_RUNS only) = what the records "
          "must show for that shape: embeddings `inputs` = inputs_per_request and usage prompt tokens; "
          "images `input_images` and usage prompt tokens above the text's by at least the image tokens; "
          "tools: every record with ≥ 1 tool call whose final call's arguments are valid, or not JSON because "
          "max_tokens cut it (explained); auto: `tool_calls` recorded (0: no call parsed); json_schema: "
          "`json_valid`; responses: output tokens = max_tokens. Raw results: docs/compatibility.json.", ""]
    whys = [(r["server"], silent_special_tokens(r["server"])) for r in results]
    L += ["Token-count mismatches explained, per server:", ""] + [f"- {n}: {w}" for n, w in whys if w] + [""]
    L += compat_section()
    old = path.read_text() if path.exists() else ""
    if KEEP in old:                    # hand-written sections below the marker survive a rerun
        L += ["", old[old.index(KEEP):].rstrip("\n")]
    path.write_text("\n".join(L) + "\n")


def merge_runs(old: Optional[dict], new: dict) -> dict:
    """``new`` (some runs of a server) over ``old`` (its last full result): old runs not rerun are
    kept, in their order; start-up facts come from the default start when it ran again."""
    if old is None:
        return new
    out = dict(old)
    out["runs"] = {**old.get("runs", {}), **new["runs"]}
    out["variants"] = {**(old.get("variants") or {}), **(new.get("variants") or {})}
    for k in ("version", "startup_s", "url_model", "argv"):
        if new.get(k) is not None and (k == "version" or "argv" in new):
            out[k] = new[k]
    out["error"] = new.get("error") or None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="run loadgen against each real server and write the matrix")
    ap.add_argument("--servers", default=",".join(servers.NAMES))
    ap.add_argument("--runs", default=None, help=f"comma list of {', '.join(list(RUNS) + list(FEATURE_RUNS))} "
                                                  "(the last ones: vLLM only)")
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ap.add_argument("--out", type=Path, default=HERE.parents[1] / "docs" / "compatibility.md")
    ap.add_argument("--merge", action="store_true",
                    help="replace only these servers' results in the existing compatibility.json")
    ap.add_argument("--render", type=Path, default=None, help="only rewrite the .md from this compatibility.json")
    a = ap.parse_args(argv)
    if a.render:
        res = json.loads(a.render.read_text())
        write_md(res, "python -m bench.compat.matrix --servers " + ",".join(r["server"] for r in res), a.out)
        return 0
    runs = list(QUICK) if a.quick else (a.runs.split(",") if a.runs else list(RUNS) + list(FEATURE_RUNS))
    names = [x.strip() for x in a.servers.split(",") if x.strip()]
    cmd = "python -m bench.compat.matrix --servers " + ",".join(names) + (" --quick" if a.quick else "")
    results = []
    work = cache_dir() / "matrix-runs" / time.strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True)
    print(f"run directories: {work}", file=sys.stderr, flush=True)
    for name in names:
        print(f"{name}: starting", file=sys.stderr, flush=True)
        results.append(run_server(name, runs, work))
    if a.merge and a.out.with_suffix(".json").exists():     # keep the other servers' last results
        before = json.loads(a.out.with_suffix(".json").read_text())
        if a.runs:                                          # and these servers' other runs
            results = [merge_runs(next((o for o in before if o["server"] == r["server"]), None), r)
                       for r in results]
        old = [r for r in before if r["server"] not in names]
        results = sorted(old + results, key=lambda r: servers.NAMES.index(r["server"]))
        cmd = "python -m bench.compat.matrix --servers " + ",".join(r["server"] for r in results)
    a.out.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    write_md(results, cmd, a.out)
    print(a.out.read_text())
    return 0 if all(r["runs"] and all(x["pass"] for x in r["runs"].values()) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
