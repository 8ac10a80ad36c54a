"""Benchmark (not a test): does a long run keep its memory flat, and how big and slow is what
it leaves (issue 42).

    servers.calib (0 ms TTFT / ITL, core 0) ◄── `loadgen run` (a subprocess, --client-cpus):
        N closed-loop requests, 64 streams, 4-token answers; native, --procs P or --engine locust
        every --every s: the RSS of the run process and of its process tree (/proc/PID/status
        VmRSS, children by /proc/PID/task/*/children) and the bytes of its record files so far
    ─► the load's progress = record bytes so far / their most (part files while there are any)
    ─► RSS at 20 % and at 95 % of the load (their difference: what is kept per request), the
       peak of the run (the tree's, sampled; the process's own from wait4)
    ─► `loadgen report DIR` and open_run(DIR).records() + .chunks() (bench.report_speed's
       timers: wall seconds, peak RSS), bytes per record of the records store
    --synthetic N: bench.report_speed.synthesise's run dir (16-token answers) instead of a run
    --arrow: the records as records.arrow (analysis.contract.columnar): the run writes it as it
        goes (--set output.records=arrow, every engine), --synthetic writes it; the report,
        open_run's tables and the bytes per record are then its

    python -m bench.soak [--requests 200000] [--procs 2 | --engine locust] [--concurrency 64]
                         [--tokens 4] [--client-cpus 1] [--every 0.2] [--keep DIR] [--arrow]
    python -m bench.soak --synthetic 10000000 [--keep DIR] [--arrow]
Goals (1M requests, a quiet box): growth 20 %→95 % <= 32 MB; run peak <= 400 MB; report <= 5 s
and <= 400 MB; open_run <= 3 s; <= 200 bytes per 4-token record. Ends with one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
SERVER_CPU = 0
GOAL = {"growth_mb": 32, "run_peak_mb": 400, "report_s": 5.0, "report_peak_mb": 400,
        "open_run_s": 3.0, "bytes_per_record": 200}


# ----------------------------------------------------------------- /proc (pure where it can be)
def rss_kb(status: bytes) -> int:
    """VmRSS in kB of one /proc/PID/status text (0 when absent: a zombie, a kernel thread)."""
    for line in status.splitlines():
        if line.startswith(b"VmRSS:"):
            return int(line.split()[1])
    return 0


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (each task's children file)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in _listdir(f"/proc/{p}/task"):
            todo += [int(c) for c in _read(f"/proc/{p}/task/{task}/children").split()]
    return out


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def sample_rss(pid: int) -> tuple[int, int]:
    """(the process's RSS, its tree's summed RSS), kB."""
    pids = tree(pid)
    sizes = [rss_kb(_read(f"/proc/{p}/status")) for p in pids]
    return sizes[0], sum(sizes)


def record_bytes(out: Path) -> int:
    """Bytes of the records written so far under ``out``: the part files while there are any
    (a --procs child's, a Locust worker's), else the run's own records store."""
    parts = main = 0
    for f in out.rglob("records*"):
        try:
            size = f.stat().st_size
        except OSError:
            continue
        if f.parent.parent == out:           # runs/<run>/records.*: the run's own store
            main += size
        else:                                # runs/<run>/procs/..., runs/<run>/locust/...
            parts += size
    return parts or main


def at_fraction(samples: list[tuple], frac: float) -> Optional[tuple]:
    """The first sample (t, rss, tree_rss, bytes) whose bytes reach ``frac`` of the most any
    sample saw (the load's progress), or None (nothing written)."""
    top = max((s[3] for s in samples), default=0)
    if top <= 0:
        return None
    return next((s for s in samples if s[3] >= frac * top), None)


def growth(samples: list[tuple], lo: float = 0.20, hi: float = 0.95) -> dict:
    """RSS at ``lo`` and ``hi`` of the load (the tree's, kB) and the difference in MB."""
    a, b = at_fraction(samples, lo), at_fraction(samples, hi)
    if a is None or b is None:
        return {"rss_lo_mb": None, "rss_hi_mb": None, "growth_mb": None}
    return {"rss_lo_mb": round(a[2] / 1024, 1), "rss_hi_mb": round(b[2] / 1024, 1),
            "growth_mb": round((b[2] - a[2]) / 1024, 1), "t_lo_s": round(a[0], 2),
            "t_hi_s": round(b[0], 2)}


# ----------------------------------------------------------------- one run
def scenario(url: str, out: Path, conc: int, n: int, tokens: int) -> str:
    """bench.ab_run's closed loop, no warm-up."""
    from bench.ab_run import scenario as ab_scenario
    sc = json.loads(ab_scenario(url, out, conc, n, tokens))
    sc["name"], sc["load"]["warmup_requests"] = "soak", 0
    return json.dumps(sc)


def soak_run(url: str, work: Path, a) -> tuple[Path, dict]:
    """One `loadgen run`, sampled every ``a.every`` s; its run dir and figures."""
    out = work / "runs"
    sc = work / "scenario.yaml"
    sc.write_text(scenario(url, out, a.concurrency, a.requests, a.tokens))     # JSON is YAML
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOADGEN_NO_CALIBRATION="1")
    cmd = ["taskset", "-c", a.client_cpus, sys.executable, "-m", "loadgen", "run", str(sc),
           "--json"]
    if a.procs:
        cmd += ["--procs", str(a.procs)]
    if a.engine == "locust":
        cmd += ["--engine", "locust", "--workers", str(a.workers)]
    if a.arrow:                                 # the columnar store, written as the run goes
        cmd += ["--set", "output.records=arrow"]
    samples: list[tuple] = []
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    got = 0
    while p.poll() is None:
        own, whole = sample_rss(p.pid)
        if whole:
            got = max(got, record_bytes(out))
            samples.append((time.monotonic() - t0, own, whole, got))
        time.sleep(a.every)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode("utf-8", "replace") if p.stderr else ""
    dirs = sorted(out.glob("*/meta.json"))
    if p.returncode != 0 or not dirs:
        raise SystemExit(f"loadgen run failed (exit {p.returncode}): {err[-800:]}")
    run_dir = dirs[-1].parent
    fig = {"wall_s": round(wall, 1), "req_s": round(a.requests / wall),
           "peak_mb": round(max(s[2] for s in samples) / 1024, 1) if samples else None,
           "peak_process_mb": round(max(s[1] for s in samples) / 1024, 1) if samples else None,
           **growth(samples)}
    return run_dir, {"run": fig, "samples": samples}


def store_bytes(run_dir: Path, n: int) -> dict:
    """The records store's size per record (the columnar file where there is one)."""
    for name in ("records.arrow", "records.jsonl"):
        f = run_dir / name
        if f.is_file():
            return {"store": name, "bytes": f.stat().st_size,
                    "bytes_per_record": round(f.stat().st_size / max(n, 1))}
    return {"store": None, "bytes": None, "bytes_per_record": None}


def analyse(run_dir: Path, n: int) -> dict:
    """`loadgen report` and open_run's tables on the run's store (records.arrow or .jsonl)."""
    from bench.report_speed import _open_run, timed
    rep = timed([sys.executable, "-m", "loadgen.cli", "report", str(run_dir.resolve())])
    try:
        opened = _open_run(run_dir.resolve())
    except subprocess.CalledProcessError as e:       # killed (out of memory): said, not raised
        opened = {"rc": e.returncode, "s": None, "peak_mb": None,
                  "error": f"open_run exited {e.returncode}" + (
                      " (killed: out of memory?)" if e.returncode == -9 else "")}
    return {"report": rep, "open_run": opened, **store_bytes(run_dir, n)}


def print_samples(samples: list[tuple], every_s: float = 2.0) -> None:
    print(f"{'t s':>7} {'rss MB':>8} {'tree MB':>8} {'records MB':>11}")
    last = -every_s
    for s in samples:
        if s[0] - last >= every_s or s is samples[-1]:
            print(f"{s[0]:7.1f} {s[1] / 1024:8.1f} {s[2] / 1024:8.1f} {s[3] / 1e6:11.1f}")
            last = s[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--procs", type=int, default=None)
    ap.add_argument("--engine", default="native", choices=("native", "locust"))
    ap.add_argument("--workers", type=int, default=1, help="Locust workers (--engine locust)")
    ap.add_argument("--client-cpus", default="1", help="taskset list for `loadgen run`")
    ap.add_argument("--every", type=float, default=0.2, help="seconds between RSS samples")
    ap.add_argument("--synthetic", type=int, default=None, metavar="N",
                    help="report a synthesised run dir of N requests instead of running one")
    ap.add_argument("--keep", default=None, help="work in this directory and keep it")
    ap.add_argument("--quiet", action="store_true", help="no RSS-over-time table")
    ap.add_argument("--arrow", action="store_true",
                    help="the records as records.arrow: the run with --set "
                         "output.records=arrow (every engine), a synthetic dir written so")
    a = ap.parse_args(argv)
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="soak-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if a.synthetic:
            from bench.report_speed import synthesise
            run_dir = work / "run"
            t = time.perf_counter()
            size = synthesise(run_dir, a.synthetic, arrow=a.arrow)
            out = {"run": {"synthetic": a.synthetic, "synthesise_s":
                           round(time.perf_counter() - t, 1), **size}}
            n = a.synthetic
        else:
            from servers.calib import CalibrationServer
            with CalibrationServer(ttft_ms=0, itl_ms=0, log=False, cpu=SERVER_CPU) as srv:
                run_dir, out = soak_run(srv.url, work, a)
            n = a.requests
            if not a.quiet:
                print_samples(out["samples"])
        out.update(analyse(run_dir, n))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    samples = out.pop("samples", None)
    kind = ("synthetic" if a.synthetic else
            "locust" if a.engine == "locust" else f"--procs {a.procs}" if a.procs else "native")
    r = out["run"]
    if not a.synthetic:
        print(f"{kind}: {n:,} requests in {r['wall_s']} s ({r['req_s']:,} req/s); RSS (tree) "
              f"{r['rss_lo_mb']} MB at 20 % → {r['rss_hi_mb']} MB at 95 % (growth "
              f"{r['growth_mb']} MB); peak {r['peak_mb']} MB (process {r['peak_process_mb']} MB)")
    print(f"report: {out['report']['s']} s, {out['report']['peak_mb']} MB; open_run tables: "
          f"{out['open_run']['s']} s, {out['open_run']['peak_mb']} MB; {out['store']}: "
          f"{out['bytes_per_record']} bytes per record; load average {os.getloadavg()[0]:.2f}")
    print(json.dumps({"bench": "soak", "kind": kind, "requests": n, **out, "goal": GOAL,
                      "samples": len(samples or ()), "loadavg": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
