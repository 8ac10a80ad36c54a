"""Benchmark (and the harness of tests/loadgen/client/test_hostile.py): what loadgen survives.

    for each case of servers/hostile/server.py × transport (wire | aiohttp: LOADGEN_HTTP; procs2:
    `--procs 2` over the wire transport; locust: the Locust engine, `--engine locust --workers 1`):
        hostile server (its own process) ◄── `python -m loadgen run` (subprocess; probe off; chat,
            stream; N requests, concurrency C, api.timeout_s T; api key from $HOSTILE_KEY = a fresh
            random sk-test-…, api.headers X-Api-Key = a fresh random hdr-…)
        reaped with os.wait4 ─► exit code, wall time, max RSS (the client's own ru_maxrss)
        killed when it outlives rounds × T + slack: a hang
        ─► records.jsonl (one per scheduled request?), error kinds vs EXPECT, a secret in any file
           of the output directory or in stdout/stderr?, a traceback on stderr?
    plus the 50 MB-line parse time: loadgen.client.sse.SSEParser().feed on one 50 MB data line in
    64 KiB pieces (stopped after --parse-budget seconds: then a lower bound)
Prints a table and ends with one JSON line (--out FILE: also written there).

    python -m bench.hostile [--cases a,b] [--transports wire,aiohttp,procs2,locust] [--requests 8]
                          [--concurrency 4] [--timeout 2] [--out bench/results/hostile-DATE.json]
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from bench.hostile_said import EXPECT_SAID, SCENARIO, summary_problems
from servers.hostile.server import CASES, HostileServer

ROOT = Path(__file__).resolve().parents[1]

TRANSPORTS = ("wire", "aiohttp")        # the test suite's (tests/loadgen/client/test_hostile.py)
# the bench's: the Locust engine too (`--engine locust --workers 1`: a gevent worker process with
# the gevent driver of the same exchange; max RSS there is the CLI process's only) and two sender
# processes (`--procs 2`, the wire transport in each child; max RSS: the parent's only)
ENGINES = TRANSPORTS + ("procs2", "locust")
ENGINE_ARGS = {"locust": ["--engine", "locust", "--workers", "1"], "procs2": ["--procs", "2"]}
# case ─► the kinds every record may carry: "ok" or an error_kind (EXPECT adds the exit code).
# Two kinds where two bounds can both fire first (an endless stream: the event/line bound or the timeout)
# or where both readings are fair (a body cut short by a close: the framing or the connection).
KINDS: dict[str, tuple[str, ...]] = {
    "normal": ("ok",),
    "header_flood": ("too_large",),
    "header_count_flood": ("too_large",),
    "long_line": ("too_large",),
    "long_line_no_newline": ("too_large",),
    "huge_json": ("too_large",),
    "endless_comments": ("timeout", "too_large"),
    "endless_tokens": ("timeout", "too_large"),
    "echo_secret_429": ("rate_limited",),            # 429: rate_limited (issue 31)
    "echo_secret_cut": ("rate_limited",),
    "echo_secret_stream": ("server_error",),
    "echo_secret_sut": ("ok",),
    "echo_headers_400": ("http",),
    "redirect_307": ("redirect",),
    "reset": ("connection",),
    "reset_before_status": ("connection",),
    "bad_chunk_size": ("protocol",),
    "non_http_reply": ("protocol",),
    "short_content_length": ("connection",),         # the peer closed early, on every transport
    "gzip_stream": ("ok",),
    "deflate_stream": ("ok",),
    "invalid_utf8": ("protocol",),
    "http10_close": ("ok",),
    "slowloris": ("timeout",),
    "never_answers": ("timeout",),
    "endless_trailers": ("too_large",),              # trailers count against the header bound
    "second_response": ("ok",),                      # 8 tokens: the second answer is not read
    "after_done_events": ("ok",),                    # nothing after [DONE] is counted
    "open_after_done": ("ok",),                      # [DONE] ends it; the slot is freed at once
    "bad_event_open": ("protocol",),                 # settled: the socket is closed at once
    "deep_json": ("protocol",),                      # the server's fault, not the client's
    "bom_stream": ("ok",),
    "interim_storm": ("too_large",),                 # 1xx answers count against the header bound
    "huge_content_length": ("too_large",),           # at the headers, not at the timeout
    "absurd_usage": ("protocol",),                   # never a figure
}


def exit_for(kinds: tuple[str, ...]) -> int:
    """The exit code a run of a case ends with: 0 when every record is ok, else 3 (failures)."""
    return 0 if kinds == ("ok",) else 3


EXPECT: dict[str, tuple[tuple[str, ...], int]] = {
    **{case: (kinds, exit_for(kinds)) for case, kinds in KINDS.items()},
    **EXPECT_SAID,            # what a server says (bench/hostile_said.py: gauges, counters, ...)
}
# cases whose socket stays open after the record is decided: the slot must be freed by the
# decision, not by api.timeout_s (the fixture's 30 s): every request is sent before it could fire
FREED_AT_ONCE = ("open_after_done", "bad_event_open", "huge_content_length")
# where a transport reads differently: aiohttp drops trailers itself (bounded, never seen by
# loadgen), so the [DONE] record stands and the socket is closed DONE_GRACE_S later
EXPECT_ON = {("endless_trailers", "aiohttp"): (("ok",), 0)}
assert set(EXPECT) == set(CASES), "every server case has an expectation"
SLACK_S = 20.0      # beyond rounds × timeout: start-up, summary and report on a busy 2-core box
RSS_LIMIT_MB = 500


@dataclass
class Outcome:
    case: str
    transport: str
    rc: Optional[int]
    hung: bool                      # killed after limit_s
    limit_s: float
    wall_s: float
    max_rss_mb: float
    expected: int                   # records the schedule holds
    records: list = field(repr=False)
    bad_lines: int                  # lines of records.jsonl that are not JSON
    kinds: dict                     # "ok" | error_kind | status ─► count
    secret_in: list                 # where a secret was found: file names, "stdout", "stderr"
    traceback: bool
    stdout: str = field(repr=False)
    stderr: str = field(repr=False)
    server_log: dict = field(repr=False)
    run_dir: str = ""

    def row(self) -> dict:
        d = asdict(self)
        for k in ("records", "stdout", "stderr", "server_log"):
            d.pop(k)
        d["records"] = len(self.records)
        return d


def scenario(n: int, concurrency: int, timeout_s: float, header_secret: str,
             case: Optional[str] = None) -> dict:
    tree = _scenario(n, concurrency, timeout_s, header_secret)
    if case in SCENARIO:
        SCENARIO[case](tree)
    return tree


def _scenario(n: int, concurrency: int, timeout_s: float, header_secret: str) -> dict:
    return {"name": "hostile",
            "api": {"endpoint": "chat", "model": "hostile", "stream": True, "probe": False,
                    "timeout_s": timeout_s, "connect_timeout_s": timeout_s,
                    "api_key_env": "HOSTILE_KEY", "headers": {"X-Api-Key": header_secret}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 8}},
            "load": {"mode": "concurrency", "concurrency": concurrency, "num_requests": n},
            "output": {"report": "text"}}


def kind_of(rec: dict) -> str:
    return "ok" if rec.get("status") == "ok" else str(rec.get("error_kind") or rec.get("status"))


def find_secrets(needles: list[str], out_dir: Path, stdout: str, stderr: str) -> list[str]:
    """Where any needle occurs: each file under ``out_dir`` (relative name), "stdout", "stderr"."""
    found = []
    raw = [n.encode() for n in needles]
    for p in sorted(out_dir.rglob("*")) if out_dir.is_dir() else []:
        if p.is_file() and any(n in p.read_bytes() for n in raw):
            found.append(str(p.relative_to(out_dir)))
    found += [name for name, text in (("stdout", stdout), ("stderr", stderr))
              if any(n in text for n in needles)]
    return found


def read_records(path: Path) -> tuple[list, int]:
    recs, bad = [], 0
    if path.is_file():
        for line in path.read_bytes().splitlines():
            try:
                recs.append(json.loads(line))
            except ValueError:
                bad += 1
    return recs, bad


def _hwm_mb(pid: int) -> float:
    """The process's own peak RSS so far (VmHWM of its address space, fresh at exec), MB; 0 when
    gone. Not rusage: ru_maxrss also counts the forking parent's RSS (a big pytest process)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def reap(proc: subprocess.Popen, limit_s: float) -> tuple[int, bool, float, float]:
    """Wait for ``proc`` at most ``limit_s`` (SIGKILL after). Returns (exit code, hung, wall s,
    peak RSS MB of the process itself: VmHWM, read every 20 ms while it runs)."""
    t0 = time.monotonic()
    hung = False
    peak = 0.0
    while True:
        peak = max(peak, _hwm_mb(proc.pid))
        pid, status, _ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > limit_s:
            hung = True
            proc.kill()
            pid, status, _ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)    # reaped here, not by Popen
    return proc.returncode, hung, wall, peak


def start_run(case_dir: Path, url: str, transport: str, n: int, concurrency: int,
              timeout_s: float, key: str, header_secret: str, extra_set=(),
              case: Optional[str] = None) -> subprocess.Popen:
    import yaml
    case_dir.mkdir(parents=True, exist_ok=True)
    path = case_dir / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario(n, concurrency, timeout_s, header_secret, case)))
    env = dict(os.environ, HOSTILE_KEY=key, PYTHONUNBUFFERED="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    engine = ENGINE_ARGS.get(transport, [])
    if transport != "locust":                # procs2: the wire transport in each child
        env["LOADGEN_HTTP"] = "wire" if transport == "procs2" else transport
    argv = [sys.executable, "-m", "loadgen", "run", str(path), *engine, "--set", f"target.url={url}",
            "--set", f"output.dir={case_dir / 'out'}", "--set", "output.run_name=run",
            *[a for kv in extra_set for a in ("--set", kv)]]
    with open(case_dir / "stdout.txt", "w") as out, open(case_dir / "stderr.txt", "w") as err:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err)


def run_case(case: str, transport: str, case_dir: Path, n: int = 8, concurrency: int = 4,
             timeout_s: float = 2.0, slack_s: float = SLACK_S) -> Outcome:
    """One `loadgen run` against one hostile case; everything the checks need."""
    rounds = -(-n // concurrency)
    limit = rounds * timeout_s + slack_s
    key = "sk-test-" + secrets.token_hex(16)
    header_secret = "hdr-" + secrets.token_hex(16)
    # whole, and a prefix with 8 random characters: a key cut by a snippet still leaks
    needles = [key, key[len("sk-test-"):], header_secret, key[:16], header_secret[:12]]
    with HostileServer(case, lifetime_s=limit + 60) as server:
        proc = start_run(case_dir, server.url, transport, n, concurrency, timeout_s, key,
                         header_secret, case=case)
        rc, hung, wall, rss = reap(proc, limit)
        try:
            log = server.log()
        except OSError as e:
            log = {"error": f"log unavailable: {e}", "requests": [], "second_port": None}
    stdout = (case_dir / "stdout.txt").read_text(errors="replace")
    stderr = (case_dir / "stderr.txt").read_text(errors="replace")
    run_dir = case_dir / "out" / "run"
    recs, bad = read_records(run_dir / "records.jsonl")
    return Outcome(case, transport, rc, hung, limit, round(wall, 2), round(rss, 1), n, recs, bad,
                   dict(Counter(kind_of(r) for r in recs)),
                   find_secrets(needles, case_dir / "out", stdout, stderr),
                   "Traceback" in stderr or "never retrieved" in stderr, stdout, stderr, log,
                   str(run_dir))


def verdict(o: Outcome) -> list[str]:
    """What is wrong with one outcome against EXPECT (empty: it survived as it should)."""
    kinds, code = EXPECT_ON.get((o.case, o.transport), EXPECT[o.case])
    bad = []
    if o.hung:
        bad.append(f"hung: killed after {o.limit_s:g} s")
    elif o.rc != code:
        bad.append(f"exit {o.rc}, expected {code}")
    if o.traceback:
        bad.append("traceback on stderr")
    ids = sorted(r.get("id") for r in o.records)
    if ids != list(range(o.expected)) or o.bad_lines:
        bad.append(f"{len(o.records)} records (+{o.bad_lines} torn), "
                   f"expected ids 0..{o.expected - 1}")
    if set(o.kinds) - set(kinds):
        bad.append(f"kinds {o.kinds}, expected {' or '.join(kinds)} only")
    if o.max_rss_mb >= RSS_LIMIT_MB:
        bad.append(f"max RSS {o.max_rss_mb:.0f} MB")
    if o.secret_in:
        bad.append(f"secret in {o.secret_in}")
    if o.run_dir and not o.hung:
        bad += summary_problems(o.case, o.run_dir, o.records)
    return bad


def parse_time(size: int = 50_000_000, piece: int = 64 * 1024, budget_s: float = 60.0,
               max_event_bytes: Optional[int] = 2**30) -> dict:
    """SSEParser.feed on one ``size``-byte data line in ``piece``-byte reads, then its end.
    ``max_event_bytes`` raised past the line (the parse of the whole line is timed), or None for
    the parser's default (which refuses the line: the bytes fed until it said so)."""
    from loadgen.client.sse import SSEParser
    try:
        p = SSEParser() if max_event_bytes is None else SSEParser(max_event_bytes=max_event_bytes)
    except TypeError:                        # a parser without the bound
        p, max_event_bytes = SSEParser(), None
    data = b"data: " + b"a" * size
    t0 = time.perf_counter()
    fed, error, items = 0, None, []
    try:
        for i in range(0, len(data), piece):
            items += p.feed(data[i:i + piece]) or ()
            fed = min(len(data), i + piece)
            if any(type(x).__name__ == "TooLarge" for x in items):
                error = "refused: TooLarge"
                break
            if time.perf_counter() - t0 > budget_s:
                error = f"budget of {budget_s:g} s spent"
                break
        else:
            items += p.feed(b"\n\n") or ()
    except Exception as e:                   # a parser that raises instead: what it said
        error = f"{type(e).__name__}: {str(e)[:200]}"
    s = time.perf_counter() - t0
    return {"bytes": len(data), "max_event_bytes": max_event_bytes, "fed": fed,
            "seconds": round(s, 3), "error": error,
            "complete": error is None and len(items) == 1 and len(items[0]) == size,
            "mb_per_s": round(fed / s / 1e6, 1) if s > 0 else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(EXPECT), help="comma-separated (default: all)")
    ap.add_argument("--transports", default=",".join(ENGINES))
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=2.0, help="api.timeout_s")
    ap.add_argument("--parse-budget", type=float, default=60.0)
    ap.add_argument("--out", default=None, help="also write the JSON here")
    a = ap.parse_args(argv)
    cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(EXPECT))
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    rows = []
    print(f"{'case':22s} {'transport':9s} {'exit':>4s} {'records':>9s} {'wall s':>7s} "
          f"{'RSS MB':>7s} {'secret':>6s}  kinds / problems")
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        for case in cases:
            for tr in a.transports.split(","):
                o = run_case(case, tr, Path(tmp) / f"{case}-{tr}", a.requests, a.concurrency,
                             a.timeout)
                problems = verdict(o)
                row = {**o.row(), "expected_kinds": list(EXPECT[case][0]),
                       "expected_exit": EXPECT[case][1], "problems": problems}
                row.pop("run_dir")
                rows.append(row)
                print(f"{case:22s} {tr:9s} {('KILL' if o.hung else str(o.rc)):>4s} "
                      f"{len(o.records):>4d}/{o.expected:<4d} {o.wall_s:7.2f} {o.max_rss_mb:7.0f} "
                      f"{'yes' if o.secret_in else 'no':>6s}  {o.kinds}"
                      f"{'  ✗ ' + '; '.join(problems) if problems else '  ✓'}", flush=True)
    parse = parse_time(budget_s=a.parse_budget)
    capped = parse_time(budget_s=a.parse_budget, max_event_bytes=None)
    short = "" if parse["complete"] else f" (incomplete: {parse['error']})"
    print(f"SSEParser, one 50 MB line in 64 KiB pieces: {parse['seconds']} s{short}; with the "
          f"default bound: {capped['error'] or 'accepted'} after {capped['fed'] / 2**20:.1f} MiB "
          f"in {capped['seconds']} s")
    out = {"bench": "hostile", "evidence": "measured", "date": time.strftime("%Y-%m-%d"),
           "host": {"cpus": os.cpu_count(), "loadavg": os.getloadavg()},
           "settings": {"requests": a.requests, "concurrency": a.concurrency,
                        "timeout_s": a.timeout, "slack_s": SLACK_S, "rss_limit_mb": RSS_LIMIT_MB},
           "survived": sum(not r["problems"] for r in rows), "runs": len(rows),
           "rows": rows, "sse_50mb_line": parse, "sse_50mb_line_default_bound": capped}
    line = json.dumps(out)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
