"""`loadgen run` against vLLM's CPU build with speculative decoding and with LoRA adapters: what
summary.json's ``spec_decode`` and ``models`` say about a real server.

    spec  vllm serve small-hf --speculative-config '{"method": "ngram", ...}' (servers.py VLLM_VARIANTS)
          ─► loadgen run: completions, temperature 0 (a random-weight model falls into a loop that
             the n-gram lookup drafts from), api.continuous_usage (tokens per chunk), /metrics scraped
          ─► summary.json spec_decode: acceptance_rate, mean_acceptance_length, draft/accepted
             tokens, per position; client: tokens per chunk, ITL per token vs per chunk
    lora  vllm serve small-hf --enable-lora --lora-modules a=<dir> b=<dir> (bench/compat/lora.py)
          ─► loadgen run: api.models [a: 1, b: 1], round_robin, --procs 2 (client.processes 2)
          ─► summary.json models: each adapter's share and figures
    ─► bench/results/served-vllm-cpu-<date>.json (+ .md): argv, version, the blocks, pass/fail

One vLLM at a time (2-core host). Run: ``python -m bench.compat.served [--only spec|lora]``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.compat import servers
from bench.compat.paths import REPO, cache_dir
from bench.compat.run_cli import run_loadgen

N = 12


def scenario(name: str, url: str, out: Path, api: dict, processes: int = 1) -> dict:
    return {"name": f"served-{name}", "target": {"url": url, "metrics_interval_s": 0.5},
            "api": {"endpoint": "completions", "ignore_eos": True, **api},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 64},
                         "output_tokens": {"dist": "fixed", "value": 48}, "seed": 0},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": N, "warmup_requests": 1},
            "client": {"processes": processes},
            "output": {"dir": str(out), "report": "text"}}


def check(variant: str, s: servers.Server, out: Path) -> dict:
    if variant == "spec":
        sc = scenario("spec", s.url, out, {"continuous_usage": True, "extra_body": {"temperature": 0}})
    else:
        sc = scenario("lora", s.url, out, {"models": [{"name": "a", "weight": 1}, {"name": "b", "weight": 1}],
                                           "model_assignment": "round_robin"}, processes=2)
    r = run_loadgen(sc, out)
    res = {"variant": variant, "version": s.version, "argv": [a.replace(str(Path.home()), "~") for a in s.argv],
           "rc": r["rc"], "wall_s": r["wall_s"], "run_dir": r["run_dir"]}
    if r["rc"] != 0 or not r["run_dir"]:
        res.update(ok=False, stderr_tail=r["stderr_tail"])
        return res
    summ = json.loads((Path(r["run_dir"]) / "summary.json").read_text())
    res["requests_completed"], res["requests_failed"] = summ["requests_completed"], summ["requests_failed"]
    if variant == "spec":
        sd = summ["spec_decode"]
        res["spec_decode"] = sd
        res["ok"] = (sd["status"] == "measured" and (sd["draft_tokens"] or 0) > 0
                     and sd["acceptance_rate"] is not None and sd["client"]["status"] == "measured")
    else:
        res["models"] = summ["models"]
        res["ok"] = (summ["requests_failed"] == 0 and summ["models"] is not None
                     and set(summ["models"]) == {"a", "b"})
    return res


def md(results: list[dict]) -> str:
    lines = ["# loadgen against vLLM CPU: speculative decoding and LoRA adapters", ""]
    for r in results:
        lines += [f"## {r['variant']}: {'PASS' if r.get('ok') else 'FAIL'}", "",
                  f"vLLM {r.get('version')}: `{' '.join(r.get('argv') or [])}`", ""]
        if "spec_decode" in r:
            sd = r["spec_decode"]
            c = sd.get("client") or {}
            lines += [f"- draft tokens {sd.get('draft_tokens')}, accepted {sd.get('accepted_tokens')}, "
                      f"drafts {sd.get('drafts')}, acceptance rate {sd.get('acceptance_rate')}, "
                      f"mean acceptance length {sd.get('mean_acceptance_length')}",
                      f"- per position: {sd.get('per_position')}",
                      f"- client tokens per chunk: {c.get('tokens_per_chunk')}; histogram {c.get('histogram')}",
                      f"- ITL per token {c.get('itl_ms_per_token')}; per chunk {c.get('itl_ms_per_chunk')}", ""]
        if "models" in r:
            for name, m in (r["models"] or {}).items():
                lines.append(f"- {name}: {m['requests']} requests, share {m['share']}, failed {m['failed']}, "
                             f"TTFT p50 {m['ttft_ms']['p50']} ms, output {m['output_throughput']} tok/s")
            lines.append("")
        if r.get("stderr_tail"):
            lines += ["```", r["stderr_tail"], "```", ""]
    return "\n".join(lines)


HEAD = "## Speculative decoding and LoRA adapters (vLLM CPU, `python -m bench.compat.served`)"


def compat_section(results_dir: Path = REPO / "bench" / "results") -> list[str]:
    """docs/compatibility.md's section from the newest served-vllm-cpu-*.json ([] when none)."""
    files = sorted(results_dir.glob("served-vllm-cpu-*.json"))
    if not files:
        return []
    results = json.loads(files[-1].read_text())
    L = [HEAD, "", f"Measured on this project's 2-core CPU VM ({files[-1].stem[-8:]}; raw: "
         f"bench/results/{files[-1].name}); `loadgen run`, concurrency 2, {N} requests, 1 warm-up, "
         "prompts 64 and 48 output tokens; each start with the flags below. spec: completions, "
         "`temperature: 0` (api.extra_body: the random-weight model falls into a loop the n-gram lookup "
         "drafts from, hence the high acceptance), `api.continuous_usage: true` (the tokens of each chunk); "
         "lora: `api.models` a and b, weight 1 each, `round_robin`, `client.processes: 2`.", "",
         "| server | version | run | flags | result | what summary.json said |", "|---|---|---|---|---|---|"]
    for r in results:
        flags = " ".join((r.get("argv") or [])[14:]) or "—"
        if "spec_decode" in r:
            sd, c = r["spec_decode"], r["spec_decode"].get("client") or {}
            said = (f"spec_decode: draft {sd.get('draft_tokens')}, accepted {sd.get('accepted_tokens')}, "
                    f"acceptance rate {_f(sd.get('acceptance_rate'))}, mean acceptance length "
                    f"{_f(sd.get('mean_acceptance_length'))}, per position "
                    f"[{', '.join(_f(p.get('acceptance_rate')) for p in sd.get('per_position') or [])}]; client: "
                    f"{_f((c.get('tokens_per_chunk') or {}).get('mean'))} tokens per chunk, "
                    f"{_f(100 * (c.get('multi_token_chunk_share') or 0))} % chunks of several")
        elif "models" in r:
            said = "models: " + "; ".join(f"{n} {m['requests']} requests (share {_f(m['share'])}, failed "
                                          f"{m['failed']})" for n, m in (r["models"] or {}).items())
        else:
            said = r.get("error") or (r.get("stderr_tail") or "")[-300:]
        L.append(f"| vllm | {r.get('version') or '—'} | {r['variant']} | `{flags}` | "
                 f"{'PASS' if r.get('ok') else 'FAIL'} | {said} |")
    return L + [""]


def _f(x) -> str:
    return "—" if x is None else f"{x:.3g}"


def update_doc(path: Path = REPO / "docs" / "compatibility.md") -> None:
    """Replace (or append) the section in docs/compatibility.md."""
    text = path.read_text()
    keep = text.split(HEAD)[0].rstrip("\n") + "\n\n"
    path.write_text(keep + "\n".join(compat_section()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="loadgen's spec_decode and models figures against vLLM CPU")
    ap.add_argument("--only", default="spec,lora")
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    a = ap.parse_args(argv)
    out = cache_dir() / "served-runs" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for v in [x.strip() for x in a.only.split(",") if x.strip()]:
        try:
            with servers.Server("vllm", variant=v) as s:
                results.append(check(v, s, out))
        except Exception as e:               # a start that fails is a result too
            results.append({"variant": v, "ok": False, "error": f"{type(e).__name__}: {str(e)[:800]}"})
        print(json.dumps(results[-1], indent=1)[:3000], file=sys.stderr)
    stamp = time.strftime("%Y%m%d")
    (a.results / f"served-vllm-cpu-{stamp}.json").write_text(json.dumps(results, indent=1) + "\n")
    (a.results / f"served-vllm-cpu-{stamp}.md").write_text(md(results) + "\n")
    update_doc()
    return 0 if all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
