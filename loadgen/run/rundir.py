"""The run directory: its name, the resolved scenario.yaml, JSON files and the summary step.

    output.dir / (output.run_name or {YYYYmmdd-HHMMSS}-{name}) /
        scenario.yaml   resolved scenario; secrets never written (api_key_env is a NAME;
                        header/arg/env values whose key looks secret are redacted)
        records.jsonl, sut.json, meta.json, power.jsonl   (written by runner.py and friends)
        summary.json    analysis.metrics.summary.store_summary(run_dir, meta)
    JSON files are written atomically (loadgen.run.storage); output.dir is checked first
    claim(run_dir): the directory made and flock'd (multilock.lock) for the run's length (one
        run at a time: a second run of the same output.dir/run_name gets one line, exit 2; the
        lock dies with the process, kill -9 included); a directory that already holds records.jsonl is refused
        report.md/html  analysis.report.run_report.write_report (output.report: full | text | none),
                        whole or not at all: a disk that refuses them ─► report.error.txt and
                        StorageError (one line naming the file; `loadgen report RUN_DIR` redoes it)
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Optional

from analysis.contract import yaml12
from loadgen import redact
from loadgen.run.multilock import lock
from loadgen.run.storage import STORAGE_ERRNOS, StorageError, atomic_write_text, check_output_dir
from loadgen.scenario.model import Scenario, ScenarioError



def run_dir_for(sc: Scenario) -> Path:
    """output.dir / run name, checked before anything starts: output.dir a writable directory
    (made if absent), the run directory inside it and not holding a run yet (ScenarioError)."""
    name = sc.output.run_name or f"{time.strftime('%Y%m%d-%H%M%S')}-{sc.name}"
    base = check_output_dir(sc.output.dir)
    d = base / name
    if not d.resolve().is_relative_to(base.resolve()):
        raise ScenarioError(f"output.run_name: {name} leaves output.dir {base}")
    if d.exists() and not d.is_dir():
        raise ScenarioError(f"output.run_name: {d} exists and is not a directory")
    if (d / "records.jsonl").exists() or (d / "records.arrow").exists():
        raise ScenarioError(f"output.run_name: {d} already holds a run (records.jsonl); "
                            "choose another name or remove it")
    return d


_claims: dict[str, int] = {}     # resolved run dir ─► the open directory fd holding its flock


def claim(d: Path) -> None:
    """Hold run directory ``d`` for this process: made if absent, then ``flock(LOCK_EX |
    LOCK_NB)`` on the directory itself (no lock file; released when the process ends, however
    it ends). Another run holding it, or records.jsonl already in it: ScenarioError, one line.
    Idempotent within a process; ``release(d)`` ends the claim."""
    key = str(d.resolve())
    if key in _claims:
        return
    fd = lock(d, d, os.O_RDONLY | os.O_DIRECTORY, lambda: "run right now; choose another name")
    if (d / "records.jsonl").exists() or (d / "records.arrow").exists():   # ended meanwhile
        os.close(fd)
        raise ScenarioError(f"output.run_name: {d} already holds a run (records.jsonl); "
                            "choose another name or remove it")
    _claims[key] = fd


def release(d: Path) -> None:
    """End this process's claim on ``d`` (no-op without one)."""
    fd = _claims.pop(str(d.resolve()), None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def resolved_yaml(sc: Scenario) -> str:
    """The scenario as run (defaults and overrides applied), secret-looking values redacted."""
    tree = sc.model_dump(mode="json")
    server = (tree.get("target") or {}).get("server") or {}
    for d in ((tree.get("api") or {}).get("headers"), server.get("args"), server.get("env")):
        for k in d or {}:
            if redact.secret_name(k):             # THE rule (loadgen.redact)
                d[k] = redact.MASK          # [REDACTED], as everywhere
    return redact.redact(yaml12.dump(tree, sort_keys=False))   # and every registered value
    # (yaml12.dump: a string YAML 1.1 or 1.2 would read as something else is quoted)


def api_key(sc: Scenario) -> Optional[str]:
    """The key from ``api.api_key_env``; it, every secret-looking ``api.headers`` value, the
    target URLs' secret query parameters and a managed server's secret-named args/env values are
    registered with ``loadgen.redact`` here (THE rule), before anything of the run is written."""
    redact.register_headers(sc.api.headers)
    for url in [sc.target.url, *(sc.target.urls or []), sc.target.metrics_path]:
        redact.register_url(url)              # ?api_key=...: masked wherever it is written
    srv = sc.target.server                    # a managed server's --api-key, HF_TOKEN, ...
    if srv is not None:
        redact.register(*(str(v) for k, v in {**srv.args, **srv.env}.items()
                          if redact.secret_name(k)))
    name = sc.api.api_key_env
    if not name:
        return None
    val = os.environ.get(name)
    if not val:
        raise ScenarioError(f"api.api_key_env: environment variable {name} is not set")
    redact.register(val)
    return val


def write_json(path: Path, obj: dict) -> None:
    """``obj`` as JSON, atomically (the old file or the new one; StorageError if the disk fails)."""
    atomic_write_text(path, json.dumps(obj, indent=2, default=str) + "\n")


DEFER_SUMMARY_RECORDS = 200_000   # LOADGEN_DEFER_SUMMARY_RECORDS overrides it (tests)


def defer_summary(run_dir: Path, meta: dict, interrupted) -> Optional[int]:
    """Every engine's rule: an interrupted run with more records than DEFER_SUMMARY_RECORDS is
    not summarised on the spot (the first Ctrl-C stops in about 2 s); ``loadgen report`` does
    it later. Returns the record count when deferred (one line on stderr says so), else None."""
    limit = int(os.environ.get("LOADGEN_DEFER_SUMMARY_RECORDS", DEFER_SUMMARY_RECORDS))
    n = int(meta.get("records_written") or 0)
    if not interrupted or n <= limit:
        return None
    import sys
    print(f"loadgen: interrupted with {n:,} records kept; summarising them now would hold the "
          f"stop: `loadgen report {run_dir}` computes summary.json and the report",
          file=sys.stderr)
    return n


def summarize_dir(run_dir: Path, meta: dict, report: str = "full") -> dict:
    """summary.json from the records on disk and ``meta`` (analysis.metrics.summary.store_summary:
    the one summary function, written through analysis.contract); then the report, which renders
    that summary.json."""
    from analysis.metrics.summary import store_summary
    try:
        summary = store_summary(run_dir, meta)     # unsent_requests: summarize's, from meta
    except OSError as e:   # disk full mid-write: no torn summary.json, one clear reason
        with contextlib.suppress(OSError):
            (run_dir / "summary.json").unlink()
        if isinstance(e, StorageError):
            raise
        raise StorageError(e.errno, f"{run_dir / 'summary.json'}: could not be written "
                           f"({e.strerror or type(e).__name__})") from None
    if report != "none":
        from analysis.report import output
        try:  # the report is a convenience; summary.json is the data
            from analysis.report.run_report import write_report
            write_report(run_dir, with_plots=report == "full")
        except StorageError:   # the disk refused it: report.error.txt written, no torn file
            raise              # one line (file, cause, `loadgen report RUN_DIR`), exit 1
        except OSError as e:
            if e.errno in STORAGE_ERRNOS:
                raise output.failed(run_dir, e) from None
            _report_bug(run_dir, e)
        except Exception as e:
            _report_bug(run_dir, e)
    return summary


def _report_bug(run_dir: Path, e: BaseException) -> None:
    """A report that failed for another reason than the disk: report.error.txt says why; the
    run and its summary stand (the report is a convenience)."""
    from analysis.report.output import ERROR_FILE
    with contextlib.suppress(OSError):
        atomic_write_text(run_dir / ERROR_FILE, f"{type(e).__name__}: {e}\n")
