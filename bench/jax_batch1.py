"""Benchmark (not a test): the JAX engine's batch-1 decode through HTTP, on the user's path, per matmul mode.

    per round, per variant (alternating, same sitting):
      python -m servers.jax --preset small --slots 8 --max-model-len 256 --matmul MODE   pinned to CPU 0
      `loadgen run` (completions, stream, ignore_eos, 64-token prompt, 128 output tokens,
                     concurrency 1, 2 warm-up + N measured requests)                   pinned to CPU 1
      ─► TPOT p50 / ITL p50 (summary.json), the server's CPU per token by thread (/proc/PID/task),
         start-up seconds
    per round: the read roof of CPU 0 = the fastest GEMV there, XLA's or the FFI kernel's, over a 134 MB
      [4096, 8192] and a 268 MB [16384, 4096] fp32 weight (a pinned subprocess, best of 20 each:
      bench.decode_profile's method)
    MBU = weight bytes read per batch-1 step (every matrix but the gathered embedding table) / TPOT
          p50 / that roof, the issue's definition (the report's MBU divides by the frozen device
          spec's bandwidth instead: a copy calibration)

    python -m bench.jax_batch1 [--variants xla,auto] [--rounds 2] [--requests 8] [--tree DIR]

--tree DIR runs the server and the read-roof probe from another source tree (an old checkout, e.g.
`git worktree add --detach DIR REV`) for a same-sitting A/B: each is a subprocess started with
cwd=DIR and PYTHONPATH=DIR, so DIR's servers/ and bench/ are the ones imported; the client
(`loadgen run`) and this script stay this tree's. No sys.path edit in any process.

Prints one line per run, a table per variant (min / median / max) and ends with ONE JSON line.
Evidence: measured (MBU calculated from measured figures).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SERVER_CPU, CLIENT_CPU = 0, 1
PROMPT, OUTPUT, WARMUP = 64, 128, 2

ROOF = r"""
import json
import jax, jax.numpy as jnp, numpy as np
from bench.decode_roofline import _best
from servers.jax import kernels
mode = kernels.configure("ffi")["mode"]
x = jnp.ones((1, 4096), jnp.float32)
out = {}
for shape in ((4096, 8192), (16384, 4096)):      # rows wider than a block (8 runs) / one block (4 streams)
    w = jnp.asarray(np.random.default_rng(0).standard_normal(shape, np.float32))
    x = jnp.ones((1, shape[0]), jnp.float32)
    for name, fn in (("xla", lambda a, b: a @ b), ("ffi", kernels.matmul)):
        if name == "ffi" and mode != "ffi":
            continue
        f = jax.jit(fn)
        _, best = _best(lambda: f(x, w).block_until_ready(), 20)
        out[f"{name} {shape[0]}x{shape[1]}"] = w.nbytes / best
    del w
print(json.dumps(out))
"""


def step_bytes() -> int:
    """Bytes of weights one batch-1 decode step reads: every parameter but the embedding table, of
    which one row is gathered (a tied table is read whole by the logits, so it counts)."""
    from servers.jax.presets import get_preset
    a = get_preset("small")
    return 4 * (a.n_params() - (0 if a.tied_embeddings else a.vocab_size * a.dim))


def tree_env(tree: Path) -> dict:
    """The environment of a subprocess that must import ``tree``'s servers/ and bench/ first."""
    old = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=str(tree) + (os.pathsep + old if old else ""))


def read_roof(tree: Path = ROOT) -> dict:
    p = subprocess.run(["taskset", "-c", str(SERVER_CPU), sys.executable, "-c", ROOF], cwd=tree,
                       env=tree_env(tree), capture_output=True, text=True, timeout=600)
    return json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}


def thread_cpu(pid: int) -> dict[int, float]:
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(t)] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out


def one_run(mode: str, n: int, work: Path, tree: Path = ROOT) -> dict:
    port = 20000 + os.getpid() % 10000
    url = f"http://127.0.0.1:{port}"
    argv = ["taskset", "-c", str(SERVER_CPU), sys.executable, "-m", "servers.jax", "--preset", "small",
            "--slots", "8", "--max-model-len", "256", "--port", str(port), "--log-level", "warning",
            "--matmul", mode]
    t0 = time.monotonic()
    log = open(work / f"server-{mode}.log", "w")
    srv = subprocess.Popen(argv, cwd=tree, env=tree_env(tree), stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        while True:
            if srv.poll() is not None:
                return {"mode": mode, "error": f"server exited {srv.returncode}; see {log.name}"}
            try:
                if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() - t0 > 900:
                return {"mode": mode, "error": "server not healthy within 900 s"}
            time.sleep(0.5)
        startup = time.monotonic() - t0
        info = json.loads(urllib.request.urlopen(url + "/info", timeout=5).read())
        sc = {"name": f"batch1-{mode}", "target": {"url": url},
              "api": {"endpoint": "completions", "stream": True, "ignore_eos": True, "include_usage": True},
              "workload": {"prompt_tokens": {"dist": "fixed", "value": PROMPT},
                           "output_tokens": {"dist": "fixed", "value": OUTPUT}, "tokenizer": "bytes", "seed": 0},
              "load": {"mode": "concurrency", "concurrency": 1, "num_requests": n, "warmup_requests": WARMUP},
              "output": {"dir": str(work / "runs"), "report": "none"}}
        path = work / f"{mode}.yaml"
        path.write_text(yaml.safe_dump(sc, sort_keys=False))
        c0 = thread_cpu(srv.pid)
        p = subprocess.run(["taskset", "-c", str(CLIENT_CPU), sys.executable, "-m", "loadgen", "run", str(path),
                            "--json"], cwd=ROOT, capture_output=True, text=True, timeout=900)
        c1 = thread_cpu(srv.pid)
        if p.returncode != 0:
            return {"mode": mode, "error": f"loadgen run exited {p.returncode}: {p.stderr.strip()[-300:]}"}
        rd = json.loads(p.stdout.strip().splitlines()[-1]).get("run_dir")
        s = json.loads((Path(rd) / "summary.json").read_text())
        tokens = (n + WARMUP) * OUTPUT
        per = sorted(((c1[t] - c0.get(t, 0.0)) / tokens * 1e3 for t in c1), reverse=True)
        mm = info.get("matmul") or {}
        m1 = {k: v for k, v in (mm.get("shapes") or {}).items() if " M=1 " in k}
        return {"mode": mode, "effective": mm.get("mode", mode), "startup_s": round(startup, 1),
                "m1_shapes": m1, "m1_kernel": sum(v.get("use") == "ffi" for v in m1.values()),
                "tpot_p50_ms": s["tpot_ms"]["p50"], "itl_p50_ms": s["itl_ms"]["p50"],
                "server_cpu_ms_per_token": round(sum(per), 2),
                "busiest_thread_cpu_ms_per_token": round(per[0], 2) if per else None,
                "ok": s.get("requests_completed"), "load1": round(os.getloadavg()[0], 2), "run_dir": rd}
    finally:
        if srv.poll() is None:
            os.killpg(srv.pid, 15)
            try:
                srv.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(srv.pid, 9)
                srv.wait()
        log.close()


def _spread(xs: list[float]) -> str:
    return "missing" if not xs else f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="xla,auto", help="matmul modes, comma-separated (xla, ffi, auto)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=8, help="measured requests per run (plus 2 warm-up)")
    ap.add_argument("--tree", type=Path, default=ROOT,
                    help="source tree whose servers.jax runs (an old checkout for an A/B; default this one)")
    opt = ap.parse_args()
    variants = [v for v in opt.variants.split(",") if v]
    bad = [v for v in variants if v not in ("xla", "ffi", "auto")]
    if bad or not variants or opt.rounds < 1 or opt.requests < 1:
        print(f"jax_batch1: --variants must name xla, ffi or auto (got {opt.variants!r}); --rounds and "
              "--requests must be >= 1", file=sys.stderr)
        return 2
    tree = opt.tree.resolve()
    if not (tree / "servers" / "jax").is_dir():
        print(f"jax_batch1: --tree: {tree} has no servers/jax", file=sys.stderr)
        return 2
    if (os.cpu_count() or 1) < 2:
        print("jax_batch1: needs 2 CPUs (server on CPU 0, client on CPU 1)", file=sys.stderr)
        return 2
    nbytes = step_bytes()
    runs, roofs = [], []
    print(f"# jax_batch1: small preset, batch-1 step reads {nbytes / 1e6:.0f} MB of weights; server CPU "
          f"{SERVER_CPU}, client CPU {CLIENT_CPU}; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="jax-batch1-") as tmp:
        for r in range(opt.rounds):
            roof = read_roof(tree)
            roofs.append(roof)
            best = max(roof.values()) if roof else None
            print(f"round {r + 1} read roof of CPU {SERVER_CPU}: "
                  + ", ".join(f"{k} GEMV {v / 1e9:.1f} GB/s" for k, v in roof.items()), flush=True)
            for mode in variants:
                res = one_run(mode, opt.requests, Path(tmp), tree)
                res["round"], res["roof_Bps"] = r + 1, best
                if "error" not in res and best:
                    res["mbu"] = nbytes / (res["tpot_p50_ms"] / 1e3) / best
                runs.append(res)
                if "error" in res:
                    print(f"round {r + 1} {mode:5}: {res['error']}", flush=True)
                    continue
                print(f"round {r + 1} {mode:5} (effective {res['effective']}): TPOT p50 {res['tpot_p50_ms']:.2f} ms"
                      f"  ITL p50 {res['itl_p50_ms']:.2f}  MBU {res.get('mbu', float('nan')):.2f}  server CPU "
                      f"{res['server_cpu_ms_per_token']:.2f} ms/token (busiest thread "
                      f"{res['busiest_thread_cpu_ms_per_token']:.2f})  start-up {res['startup_s']:.0f} s  "
                      f"kernel at M=1 {res['m1_kernel']}/{len(res['m1_shapes'])} shapes  "
                      f"load {res['load1']:.2f}", flush=True)
    summary = {}
    print("\nvariant  TPOT p50 ms min/median/max   MBU min/median/max   server CPU ms/token median")
    for mode in variants:
        ok = [x for x in runs if x["mode"] == mode and "error" not in x]
        t = [x["tpot_p50_ms"] for x in ok]
        m = [x["mbu"] for x in ok if "mbu" in x]
        c = [x["server_cpu_ms_per_token"] for x in ok]
        summary[mode] = {"tpot_p50_ms": t, "mbu": m, "server_cpu_ms_per_token": c}
        print(f"{mode:7}  {_spread(t):28}  {_spread(m):19}  {statistics.median(c) if c else 'missing'}")
    print(json.dumps({"bench": "jax_batch1", "evidence": "measured", "step_bytes": nbytes, "tree": str(tree),
                      "prompt": PROMPT, "output": OUTPUT, "rounds": opt.rounds, "requests": opt.requests,
                      "read_roof_Bps": roofs, "runs": runs, "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
