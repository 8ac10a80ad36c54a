"""Live progress (completed / failed / in flight, output tokens/s) and the final summary table.

    Dispatcher ─► on_send(spec) / on_done(record) ─► counters ─► rich progress bar (TTY only)
    runner ─► warn(text) (probe findings: a rejected field dropped, ...) ─► one line (TTY only)
    summary.json dict ─► summary_table() ─► rich table of key metrics + warnings + the verdict
        print_summary: + counts (aborted too), the aborted / retried / audio lines
        (analysis.report.hangups, analysis.report.audio), cost, prefix cache, roofline
    records ─► failure_causes() ─► the most common error kinds, each with a sample message

The live display is off when stderr is not a terminal or with ``--json``; counting still runs
(cheap integer updates) so the caller can read them either way.
"""
from __future__ import annotations

import time
from typing import Optional

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from analysis.report.cost_accuracy import accuracy_line, cost_line
from analysis.report.served import prefix_line, run_meta, spec_line
from analysis.report.audio import audio_line
from analysis.text import one_line
from analysis.contract.records import as_records
from analysis.report.hangups import aborted_line, retry_line


PIPE_WIDTH = 240     # columns when stdout is not a terminal (rich would assume 80 and cut cells)


def stdout_console() -> Console:
    """A Console for stdout tables: a terminal's own width; a pipe, a file or CI (not a
    terminal) gets PIPE_WIDTH columns, so no cell is cut ("fa…", "VAL…") and nothing wraps."""
    c = Console()
    return c if c.is_terminal else Console(width=PIPE_WIDTH)


class RunProgress:
    def __init__(self, total: Optional[int], enabled: bool = True, label: str = "requests",
                 console: Optional[Console] = None, point: Optional[str] = None):
        # point: which sweep point these bars belong to ("concurrency=4 3/8"), shown before
        # each phase's label so the points' warm-up / measured bars tell apart
        self.point = point
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.total = total
        self.label = label
        self.sent = self.completed = self.failed = self.cancelled = 0
        self.aborted = 0                    # load.cancel: hung up on purpose (not failed)
        self.tokens = 0
        self._t0 = time.monotonic()
        self._bar: Optional[Progress] = None
        self._task = None
        self._sent_ids: set[int] = set()
        self.warnings: list[str] = []

    def warn(self, text: str) -> None:
        """A finding the user must see before the numbers (it also lands in summary.json)."""
        self.warnings.append(text)
        if self.enabled:
            self.console.print(f"[yellow]warning:[/] {escape(one_line(text))}", highlight=False)

    @property
    def in_flight(self) -> int:
        return self.sent - self.completed - self.failed - self.cancelled - self.aborted

    def start(self, label: Optional[str] = None, total: Optional[int] = None) -> None:
        self.label = label or self.label
        self.total = total if total is not None else self.total
        self.sent = self.completed = self.failed = self.cancelled = self.tokens = 0
        self.aborted = 0
        self._sent_ids = set()
        self._t0 = time.monotonic()
        if not self.enabled:
            return
        if self._bar is None:
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total}"),
                                 TextColumn("{task.fields[stats]}"), TimeElapsedColumn(),
                                 console=self.console, transient=False, refresh_per_second=4)
            self._bar.start()
        desc = f"{self.point}  {self.label}" if self.point else self.label
        self._task = self._bar.add_task(escape(desc), total=self.total, stats="")

    def on_send(self, spec) -> None:
        self.sent += 1
        self._sent_ids.add(spec.id)
        self._refresh()

    def on_done(self, rec) -> None:
        if rec.status == "ok":
            self.completed += 1
        elif rec.status == "cancelled":
            self.cancelled += 1
        elif rec.status == "aborted":
            self.aborted += 1
        else:
            self.failed += 1
        if rec.id in self._sent_ids:
            self._sent_ids.discard(rec.id)
        else:  # cancelled before it reached the client
            self.sent += 1
        self.tokens += rec.output_tokens or 0
        self._refresh()

    def _refresh(self) -> None:
        if self._bar is None or self._task is None:
            return
        el = max(time.monotonic() - self._t0, 1e-9)
        stats = (f"ok {self.completed}  failed {self.failed}  in flight {self.in_flight}  "
                 f"{self.tokens / el:,.0f} tok/s")
        if self.cancelled:
            stats += f"  cancelled {self.cancelled}"
        if self.aborted:
            stats += f"  aborted {self.aborted}"
        self._bar.update(self._task, completed=self.completed + self.failed + self.cancelled
                         + self.aborted,
                         stats=stats)

    def stop(self) -> None:
        if self._bar is not None:
            self._refresh()
            self._bar.stop()
            self._bar = None


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.2f}{unit}"
    return f"{v}{unit}"


def summary_table(summary: dict, run_dir: str) -> Table:
    t = Table(title=f"loadgen run — {run_dir}", show_header=True, header_style="bold")
    t.add_column("metric")
    t.add_column("mean", justify="right")
    t.add_column("p50", justify="right")
    t.add_column("p90", justify="right")
    t.add_column("p99", justify="right")
    names = [("ttft_ms", "TTFT ms"), ("ttft_from_scheduled_ms", "TTFT from scheduled ms"),
             ("tpot_ms", "TPOT ms"), ("itl_ms", "ITL ms"), ("e2el_ms", "E2E ms"),
             ("schedule_lag_ms", "schedule lag ms")]
    for key, label in names:
        s = summary.get(key) or {}
        if s.get("count"):
            t.add_row(label, *(_fmt(s.get(k)) for k in ("mean", "p50", "p90", "p99")))
    return t


def print_summary(summary: dict, run_dir: str, console: Optional[Console] = None) -> None:
    c = console or stdout_console()
    c.print(summary_table(summary, run_dir))
    aborted = (f"aborted {summary.get('requests_aborted')}  "
               if summary.get("requests_aborted") else "")
    c.print(f"requests: ok {summary.get('requests_completed')}  failed "
            f"{summary.get('requests_failed')}  cancelled {summary.get('requests_cancelled')}  "
            f"{aborted}warm-up {summary.get('requests_warmup')}   duration "
            f"{_fmt(summary.get('duration_s'), ' s')}", highlight=False)
    c.print(f"throughput: {_fmt(summary.get('request_throughput'), ' req/s')}   output "
            f"{_fmt(summary.get('output_throughput'), ' tok/s')}   goodput "
            f"{_fmt(summary.get('goodput'), ' req/s')}")
    line = embeddings_line(summary)
    if line:
        c.print(line, highlight=False)
    line = probe_line(summary)
    if line:
        c.print(line, highlight=False)
    for line in (accuracy_line(summary), cost_line(summary)):   # workload.dataset, cost
        if line:
            c.print(line, highlight=False, markup=False)
    for line in (prefix_line(summary, run_meta(run_dir)), spec_line(summary)):   # issue 31
        if line:
            c.print(line, highlight=False, markup=False)
    energy = summary.get("energy") or {}
    if energy:
        c.print(f"energy: {energy.get('status')}" + (f" ({energy.get('reason')})"
                                                      if energy.get("reason") else ""))
    for line in (aborted_line(summary), retry_line(summary), audio_line(summary)):
        if line:                                   # load.cancel, api.retry, transcriptions
            c.print(line, highlight=False, markup=False)
    retried = summary.get("requests_retried")
    if retried:
        c.print(f"retried: {retried} request(s) sent again on a fresh connection after a stale "
                "keep-alive connection failed before the server saw them")
    for w in list(summary.get("warnings") or []) + list(
            (summary.get("client") or {}).get("warnings") or []):
        c.print(f"[yellow]warning:[/] {escape(one_line(w))}", highlight=False)
    line = roofline_line(summary, run_dir)
    if line:
        c.print(line, highlight=False)
    v = summary.get("verdict") or {}
    if v:
        head = "[bold green]VALID[/]" if v.get("valid") else "[bold red]INVALID[/]"
        c.print(f"verdict: {head}")
        for r in v.get("reasons") or []:
            c.print(f"  - {escape(one_line(r))}", highlight=False)


def embeddings_line(summary: dict) -> Optional[str]:
    """An embeddings run's figures in one line (summary.json "embeddings"); None for others."""
    e = summary.get("embeddings")
    if not isinstance(e, dict):
        return None
    lat = e.get("latency_ms") or {}
    return (f"embeddings: latency p50 {_fmt(lat.get('p50'))} / p90 {_fmt(lat.get('p90'))} / "
            f"p99 {_fmt(lat.get('p99'), ' ms')}   {_fmt(e.get('request_throughput'), ' req/s')}   "
            f"{_fmt(e.get('input_token_throughput'), ' input tok/s')}   "
            f"{_fmt(e.get('input_throughput'), ' inputs/s')}")


def probe_line(summary: dict) -> Optional[str]:
    """load.probe in one line: the probe's TTFT/TPOT p50 alone → beside the load (summary.json
    "probe_stream"); None without a probe stream."""
    ps = summary.get("probe_stream")
    if not isinstance(ps, dict):
        return None
    a, u, x = ps["alone"], ps["under_load"], ps["slowdown"]

    def part(name: str, key: str, ratio: str) -> str:
        r = x.get(ratio)
        return (f"{name} p50 {_fmt(a[key]['p50'])} → {_fmt(u[key]['p50'], ' ms')}"
                + (f" ({r:.2f}×)" if r is not None else ""))
    return (f"probe stream ({a['requests']} alone, {u['requests']} beside): "
            f"{part('TTFT', 'ttft_ms', 'ttft_p50')}, {part('TPOT', 'tpot_ms', 'tpot_p50')}")


def roofline_line(summary: dict, run_dir=None) -> Optional[str]:
    """The roofline in brief, from summary.json's "roofline" block (analysis.roofline.run_roofline,
    against the spec frozen into the run): TPOT p50 vs the decode floor and MBU (and the batch-1
    MBU: gaps with one request in flight, when known); the request
    nearest its own prefill floor; each broken floor on a line of its own. None without a block."""
    r = summary.get("roofline")
    if not isinstance(r, dict):
        return None
    if r.get("status") != "calculated":
        return f"roofline: not shown ({r.get('reason')})"
    dev, d, p = r.get("device") or {}, r.get("decode") or {}, r.get("prefill")
    src = {"frozen": "frozen", "override": "recomputed, not the frozen spec",
           "meta.device_spec": "spec file"}.get(dev.get("source"), "spec")
    bw = dev.get("mem_bandwidth")
    out = (f"roofline ({dev.get('name')}, {src}; evidence {dev.get('evidence')}): TPOT p50 "
           f"{_fmt(r.get('tpot_p50_ms'), ' ms')} vs decode floor "
           f"{_fmt(r.get('decode_floor_ms'), ' ms')} ({d.get('step_bytes', 0) / 1e6:.3g} MB/step ÷ "
           + (f"{bw / 1e9:.1f} GB/s" if bw else "unknown bandwidth")
           + f", batch {d.get('batch')})")
    if r.get("mbu") is not None:
        out += f", MBU {r['mbu']:.2f}"
    if (r.get("batch1") or {}).get("mbu") is not None:     # 1 request in flight: by_concurrency
        out += f", batch-1 MBU {r['batch1']['mbu']:.2f}"
    if p:
        out += (f"; TTFT nearest its own prefill floor {_fmt(p.get('ttft_ms'), ' ms')} vs "
                f"{_fmt(p.get('floor_ms'), ' ms')} ({p.get('prompt_tokens')}-token prompt, "
                f"{p.get('requests')} requests)")
    for b in r.get("broken_floors") or []:
        out += f"\nroofline: broken floor: {b.get('text')}"
    return out


def failure_causes(records, top: int = 3, statuses=("error",)) -> list[dict]:
    """The most common error kinds of the measured records with one of ``statuses``:
    ``{"kind", "count", "sample"}`` each (``sample``: the first such record's message), most
    common first."""
    by: dict = {}
    for r in as_records(records):
        if r.phase != "measured" or r.status not in statuses:
            continue
        kind = r.error_kind or "unknown"
        e = by.get(kind)
        if e is None:
            by[kind] = {"kind": kind, "count": 1,
                        "sample": " ".join(str(r.error or "").split())}
        else:
            e["count"] += 1
    return sorted(by.values(), key=lambda e: -e["count"])[:top]


def failure_lines(summary: dict, causes: list[dict]) -> list[str]:
    """Plain lines: how many measured requests did not complete, and why (screen and CI logs)."""
    done = summary.get("requests_completed") or 0
    failed = summary.get("requests_failed") or 0
    cancelled = summary.get("requests_cancelled") or 0
    total = done + failed + cancelled
    if not total or (done and not failed):
        return []
    if done:
        head = f"{failed} of {total} measured requests failed"
    elif failed == total:
        head = f"every measured request failed ({failed} of {total})"
    else:
        head = f"no measured request completed ({failed} failed, {cancelled} cancelled)"
    out = [f"{head}; most common causes:"]
    for e in causes:
        out.append(f"  {e['kind']} x{e['count']}: {e['sample'][:200]}")
    return out
