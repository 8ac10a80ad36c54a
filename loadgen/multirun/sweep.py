"""Sweeps: one full run per load point under one sweep directory, resumable.

    Scenario + sweep block ─► points: sweep.values (load.concurrency | load.rate)
                           └► or search max_rate_under_slo: bracket (double up from rate_low,
                              halve down if it fails), then bisect until (hi - lo) / lo ≤ tolerance
                           └► or search max_concurrency_under_slo: the same on whole numbers, until
                              hi = lo + 1 (sweep_search.py); both record goodput_at_answer
    each point/probe ─► runner.run_scenario(scenario with param=value, output in the sweep dir;
                        a target.server is started once, in the sweep dir, and shared)
                     ─► <sweep dir>/<param>-<value>/ (a normal run directory)
    ─► <sweep dir>/sweep.json (points, their key figures, the search's bracket) ─► table
    ─► <sweep dir>/frontier.json (analysis.metrics.frontier: throughput per accelerator vs
       interactivity, the non-dominated points marked) + frontier.png (output.report full)
    ─► <sweep dir>/report.md, report.html (analysis.report.sweep; output.report text | full)

Before anything runs: the sweep directory is held (loadgen/run/multilock.py: a second sweep into
it exits 2 naming the holder's pid), every value is validated (sweep_plan.check_points) and the
plan is written to sweep.json with "complete": false; "complete" becomes true at the end, so a
sweep that died (kill -9) reads as incomplete. A search never probes past the scenario's limits
or num_requests (sweep_plan.concurrency_cap / rate_cap; the answer then says "capped at").
sweep.json and frontier.json hold only finite numbers (NaN / Infinity: null, noted on the row).

A point whose summary.json exists is reused on rerun (same scenario: a fingerprint of the
resolved scenario is kept in sweep.json and a mismatch is an error, never a silent mix). A point
left without summary.json, or whose run was interrupted, is moved aside to ``<name>.incomplete`` and run again.
A probe "passes" when its MLPerf-style verdict is VALID (SLO percentiles, no failures, the
schedule kept, the client not saturated); the search assumes that is monotone in the rate.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Callable, Optional

from analysis.contract import ContractError, read_meta
from analysis.metrics.frontier import capacity_row, frontier
from analysis.metrics.summary import summary_of
from loadgen.multirun.cache_hygiene import hygiene, reset_prefix_cache, sent_count
from loadgen.run.calibration import refreeze_after_shared_server
from loadgen.run.meta import write_meta
from loadgen.run.multilock import held
from loadgen.run.rundir import summarize_dir
from loadgen.run.server_traces import for_shared_server, shared_spec
from loadgen.run.storage import atomic_write_text
from loadgen.multirun.sweep_plan import (capped_line, check_points, concurrency_cap, dumps, finite,
                                    plan, probe_scenario, rate_cap, read_sweep_json)
from loadgen.multirun.sweep_search import concurrency_search
from loadgen.scenario.model import Scenario, ScenarioError

RunFn = Callable[[Scenario], dict]   # scenario ─► summary dict (runs it, or raises)


def fingerprint(sc: Scenario) -> str:
    """Hash of the resolved scenario minus the output block (which the sweep itself sets)."""
    tree = sc.model_dump(mode="json", exclude={"output"})
    return hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest()[:16]


def sweep_dir_for(sc: Scenario) -> Path:
    return Path(sc.output.dir) / (sc.output.run_name or f"sweep-{sc.name}")


def point_name(param: str, value: float) -> str:
    return f"{param.split('.')[-1]}-{value:g}"


def point_figures(summary: dict) -> dict:
    """The row a sweep table shows for one run."""
    def p(key, q):
        return (summary.get(key) or {}).get(q)
    v = summary.get("verdict") or {}
    return {"requests_completed": summary.get("requests_completed"),
            "requests_failed": summary.get("requests_failed"),
            "request_throughput": summary.get("request_throughput"),
            "output_throughput": summary.get("output_throughput"),
            "goodput": summary.get("goodput"),
            "ttft_p50_ms": p(summary.get("headline_ttft") or "ttft_ms", "p50"),
            "ttft_p99_ms": p(summary.get("headline_ttft") or "ttft_ms", "p99"),
            "tpot_p50_ms": p("tpot_ms", "p50"), "tpot_p99_ms": p("tpot_ms", "p99"),
            "e2el_p99_ms": p("e2el_ms", "p99"),
            "valid": v.get("valid"), "reasons": v.get("reasons") or [],
            "warnings": list(summary.get("warnings") or []),   # cache hygiene's among them
            **capacity_row(summary)}                # interactivity, per accelerator, J/token


class Sweep:
    """Runs the points of ``sc.sweep``; ``run_fn`` executes one point (the runner by default)."""

    def __init__(self, sc: Scenario, run_fn: Optional[RunFn] = None, live: bool = False,
                 exporter=None, predictor=None):
        if sc.sweep is None:
            raise ScenarioError("sweep: the scenario has no sweep block "
                                "(add sweep.values or sweep.search)")
        self.fp = fingerprint(sc)           # before the receiver's port is pinned
        sc = for_shared_server(sc)
        self.sc = sc
        self.spec = sc.sweep
        self.dir = sweep_dir_for(sc)
        self.run_fn = run_fn or (lambda point_sc: _run_point(point_sc, live, self._server(),
                                                              self.label, exporter))
        self.label: Optional[str] = None    # the point being run, for its progress bars
        self.managed = None                 # one managed server for every point, started lazily
        self.points: list[dict] = []
        self.search: Optional[dict] = None
        self.max_sent = 0                   # the most requests an earlier point sent (hygiene)
        self.slo: Optional[dict] = None     # the resolved SLO (a point's summary): frontier shading
        self.plan: Optional[dict] = None    # sweep.json "plan", written before the first point
        self.complete = False               # true once every planned point (or probe) has run
        self.report: Optional[str] = None   # SWEEP_DIR/report.html once written
        self.predictor = predictor          # --predict: loadgen.multirun.predict.Predictor, or None

    # -- bookkeeping ---------------------------------------------------------------------
    def _check_dir(self) -> None:
        old = read_sweep_json(self.dir / "sweep.json")       # garbled: one line, exit 2
        if old is not None:
            if old.get("fingerprint") != self.fp:
                raise ScenarioError(
                    f"output.run_name: {self.dir} holds a sweep of a different scenario "
                    "(fingerprint mismatch); choose another output.run_name or remove it")
            # the points an earlier (perhaps killed) session finished stay listed
            self.points = [p for p in old.get("points") or [] if isinstance(p, dict)
                           and (self.dir / str(p.get("run_dir")) / "summary.json").is_file()
                           and isinstance(p.get("value"), (int, float))]
        self.dir.mkdir(parents=True, exist_ok=True)

    def _save(self) -> dict:
        out = {"fingerprint": self.fp, "scenario": self.sc.name, "param": self.spec.param,
               "mode": self.sc.load.mode, "plan": self.plan, "complete": self.complete,
               "points": self.points, "search": self.search,
               "rule": "a point passes when its verdict is VALID"}
        atomic_write_text(self.dir / "sweep.json", dumps(out))       # finite numbers only
        fr = {**frontier(self.points, self.spec.param), "slo": self.slo}
        from analysis.predict.overlay import overlay    # --predict: forecast beside measured
        if (fc := overlay(self.points)) is not None:
            fr["forecast"] = fc
        atomic_write_text(self.dir / "frontier.json", dumps(fr))
        return out

    def point(self, value: float, of: str = "") -> dict:
        """Run (or reuse) one point; returns its row. ``of``: its place, "3/8" or "probe 2/6"."""
        name = point_name(self.spec.param, value)
        self.label = f"{self.spec.param.split('.')[-1]}={value:g}" + (f" {of}" if of else "")
        d = self.dir / name
        summary_path = d / "summary.json"
        reused = summary_path.is_file() and not _interrupted(d)
        if reused:
            summary = summary_of(d)     # summary.json through the contract (older: recomputed)
        else:
            point_sc = probe_scenario(self.sc, value, self.dir, name)  # values: checked up front
            if d.exists():
                aside = d.with_name(name + ".incomplete")
                shutil.rmtree(aside, ignore_errors=True)
                d.rename(aside)
            reset = None
            if self.spec.reset_prefix_cache and self.max_sent:
                reset = reset_prefix_cache(self._base_url())
            summary = self.run_fn(point_sc)
            summary = self._hygiene(d, reset, summary) or summary
        row, bad = finite({"value": value, "run_dir": name, "reused": reused,
                           **point_figures(summary)})
        if bad:     # a NaN / Infinity in the summary: null here, and said so
            row["non_finite"] = {"fields": bad, "reason": "not a finite number in the point's "
                                                          "summary (written as null)"}
        self.slo = self.slo or summary.get("slo")
        self.points = [p for p in self.points if p["value"] != value] + [row]
        self.points.sort(key=lambda p: p["value"])
        self._save()
        return row

    def _base_url(self) -> str:
        return self.managed.base_url if self.managed is not None else (self.sc.target.primary_url or "")

    def _hygiene(self, d: Path, reset: Optional[dict], summary: Optional[dict]) -> Optional[dict]:
        """Record what earlier points left in a prefix cache; re-summarise when it warns."""
        now = sent_count(d)
        h = hygiene(now, self.max_sent, reset, summary)
        self.max_sent = max(self.max_sent, now)
        if not (h["prompts_seen_before"] or reset):
            return None
        meta = read_meta(d)
        if meta is None:
            return None
        meta = write_meta(d, {**meta.as_dict(), "cache_hygiene": h})   # through the contract
        if h["warning"]:            # on the console as it happens, not only in the JSON
            print(f"loadgen sweep: warning: {d.name}: {h['warning']}", file=sys.stderr)
        return summarize_dir(d, meta, self.sc.output.report)

    def _server(self):
        """The target.server process shared by all points (started at the first run)."""
        if self.sc.target.server is None:
            return None
        if self.managed is None:
            from loadgen.targets.managed import ManagedServer
            # traced: its spans go to the receiver each point opens on the pinned port
            self.managed = ManagedServer(shared_spec(self.sc), self.dir).start()
        return self.managed

    # -- the two kinds ---------------------------------------------------------------------
    def run(self) -> dict:
        with held(self.dir, "search" if self.spec.search else "sweep"):
            return self._run()

    def _run(self) -> dict:
        self._check_dir()
        check_points(self.sc, self.dir)     # every value, before the first point (exit 2)
        self.plan = plan(self.sc)
        self._save()                        # the plan, before anything runs
        try:
            if self.spec.search == "max_rate_under_slo":
                self._search()
            elif self.spec.search == "max_concurrency_under_slo":
                self._search_concurrency()
            else:
                for i, v in enumerate(self.spec.values, 1):
                    self.point(v, f"{i}/{len(self.spec.values)}")
        finally:
            if self.managed is not None:
                self.managed.stop()
        if self.managed is not None:    # stopped: the points' roofline spec, calibrated once
            for d in refreeze_after_shared_server([self.dir / p["run_dir"] for p in self.points]):
                summarize_dir(d, read_meta(d).as_dict(), self.sc.output.report)
        if self.predictor is not None:  # --predict: summary.json "forecast" (docs/predict.md)
            from loadgen.multirun.predict import attach_forecasts
            attach_forecasts(self.dir, self.points, self.predictor)
        self.complete = True
        out = self._save()
        if self.sc.output.report == "full":
            from analysis.report.plots_frontier import write_frontier_png
            write_frontier_png(self.dir)
        if self.sc.output.report != "none":
            self.report = self._write_report()
        return {**out, "report": self.report}

    def _write_report(self) -> Optional[str]:
        """SWEEP_DIR/report.md + report.html, as `loadgen report SWEEP_DIR` writes them; a
        convenience: a failure is kept in report.error.txt, never fails the sweep."""
        try:
            from analysis.report.sweep import write_sweep_report
            return str(write_sweep_report(self.dir, with_plots=self.sc.output.report == "full")[1])
        except Exception as e:
            with contextlib.suppress(OSError):
                (self.dir / "report.error.txt").write_text(f"{type(e).__name__}: {e}\n")
            return None

    def _search(self) -> None:
        s = self.spec
        probes: list[dict] = []
        self.search = {"kind": s.search, "tolerance": s.tolerance, "max_probes": s.max_probes,
                       "probes": probes, "max_passing_rate": None, "min_failing_rate": None,
                       "converged": False, "stopped": None}

        def probe(rate: float) -> bool:
            row = self.point(rate, f"probe {len(probes) + 1}/{s.max_probes}")
            probes.append({"rate": rate, "valid": bool(row["valid"]), "reused": row["reused"],
                           "goodput": row.get("goodput")})
            self._save()
            return bool(row["valid"])

        lo: Optional[float] = None
        hi: Optional[float] = None
        cap, why = rate_cap(self.sc)
        r = s.rate_low
        # bracket: find a passing rate at or below rate_low, and a failing one above it
        while len(probes) < s.max_probes:
            if probe(r):
                lo = r
                break
            hi = r
            r /= 2
        if lo is not None and hi is None:
            r = min(s.rate_high or lo * 2, cap)
            while len(probes) < s.max_probes and r > lo:
                if not probe(r):
                    hi = r
                    break
                lo, r = r, min(r * 2, cap)
        # bisect
        while lo is not None and hi is not None and (hi - lo) / lo > s.tolerance \
                and len(probes) < s.max_probes:
            mid = (lo + hi) / 2
            if probe(mid):
                lo = mid
            else:
                hi = mid
        self.search.update(max_passing_rate=lo, min_failing_rate=hi,
                           capped=capped_line(cap, why) if hi is None and lo == cap else None)
        if self.search["capped"]:
            self.search["stopped"] = (f"{self.search['capped']} (every probed rate passed; no "
                                      "run can go higher)")
        elif lo is None:
            self.search["stopped"] = "no probed rate passed (lower sweep.rate_low)"
        elif hi is None:
            self.search["stopped"] = "every probed rate passed (raise sweep.rate_high/max_probes)"
        elif (hi - lo) / lo <= s.tolerance:
            self.search["converged"] = True
        else:
            self.search["stopped"] = f"max_probes {s.max_probes} reached before the tolerance"
        self.search["goodput_at_answer"] = self._goodput_at(lo)

    def _goodput_at(self, value) -> Optional[float]:
        """The goodput (req/s meeting the SLO) of the run at the search's answer."""
        row = next((p for p in self.points if value is not None and p["value"] == value), None)
        return row.get("goodput") if row else None

    def _search_concurrency(self) -> None:
        s = self.spec
        probes: list[dict] = []
        self.search = {"kind": s.search, "max_probes": s.max_probes, "probes": probes,
                       "max_passing_concurrency": None, "min_failing_concurrency": None,
                       "bracket": [], "converged": False, "stopped": None,
                       "goodput_at_answer": None}

        def probe(n: int) -> bool:
            row = self.point(n, f"probe {len(probes) + 1}/{s.max_probes}")
            probes.append({"concurrency": n, "valid": bool(row["valid"]),
                           "reused": row["reused"], "goodput": row.get("goodput")})
            self._save()
            return bool(row["valid"])

        res = concurrency_search(probe, s.concurrency_low, s.concurrency_high, s.max_probes,
                                 *concurrency_cap(self.sc))
        for pr, br in zip(probes, res["bracket"]):
            pr["bracket_after"] = br
        self.search.update(res, goodput_at_answer=self._goodput_at(res["max_passing_concurrency"]))


def _interrupted(run_dir: Path) -> bool:
    try:
        meta = read_meta(run_dir)
    except ContractError:       # not JSON, or not a meta.json: run the point again
        return True
    return meta is None or bool(meta.interrupted)


def _run_point(sc: Scenario, live: bool = False, server=None, label: Optional[str] = None,
               exporter=None) -> dict:
    """One point's run; ``exporter`` (loadgen.live, --metrics-port) follows it while it goes."""
    from loadgen.live.flags import run_live
    from loadgen.console.progress import RunProgress
    res = run_live(exporter, sc, RunProgress(None, enabled=live, point=label), server)
    if res.interrupted:
        raise KeyboardInterrupt  # stop the sweep; the point stays incomplete for the rerun
    return res.summary or {}


def run_sweep(sc: Scenario, run_fn: Optional[RunFn] = None, live: bool = False,
              exporter=None, predictor=None) -> tuple[Path, dict]:
    sw = Sweep(sc, run_fn, live, exporter, predictor)
    return sw.dir, sw.run()
