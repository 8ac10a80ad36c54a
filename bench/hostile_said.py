"""bench/hostile.py's cases about what a server SAYS (servers/hostile/said.py, issue #41): what each
needs of the scenario, what its records must be, and what summary.json / meta.json must then say
(a figure the sanity gate refused is null with its reason; nothing crashes).

    SCENARIO[case](tree)        the scenario tree bench.hostile.scenario() made, changed in place
    EXPECT_SAID[case]           (the kinds every record may carry, the exit code)
    summary_problems(case, run_dir) ─► [what is wrong] (empty: the gate held)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

RUNNING = ("running_nan", "running_inf", "running_text")


def _cancel(tree: dict) -> None:               # load.cancel: the leak check reads the gauge after
    tree["load"]["cancel"] = {"fraction": 0.5, "after_tokens": 2, "seed": 1}


def _fast_scrapes(tree: dict) -> None:         # a scrape inside the run, not only at its edges
    tree.setdefault("target", {})["metrics_interval_s"] = 0.05


def _million(tree: dict) -> None:              # no event bound (4 × 10^6 + 1024) before the timeout
    tree["workload"]["output_tokens"]["value"] = 1_000_000


def _transcriptions(tree: dict) -> None:
    tree["api"]["endpoint"] = "transcriptions"
    tree["workload"] = {"seed": 3, "audio": {"seconds": 0.5, "sample_rate": 8000, "pool": 2}}


SCENARIO: dict[str, Callable[[dict], None]] = {
    **{c: _cancel for c in RUNNING},
    "counter_reset": _fast_scrapes, "prefix_hits_over": _fast_scrapes,
    "endless_tokens_1m": _million, "transcription_invalid_utf8": _transcriptions,
}

EXPECT_SAID: dict[str, tuple[tuple[str, ...], int]] = {
    **{c: (("ok", "aborted"), 0) for c in RUNNING},   # half hang up after 2 tokens, on purpose
    "counter_reset": (("ok",), 0),
    "prefix_hits_over": (("ok",), 0),
    "retry_after_nonascii": (("rate_limited",), 3),   # not client (int("²") raised before)
    "transcription_invalid_utf8": (("protocol",), 3),  # as chat marks the same bytes
    "endless_tokens_1m": (("timeout",), 3),            # memory bounded while it streams
}


def _read(path: Path) -> Optional[dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def summary_problems(case: str, run_dir: str | Path, records: list) -> list[str]:
    """What summary.json, meta.json and the records say that the gate should have stopped."""
    if case not in EXPECT_SAID:
        return []
    d = Path(run_dir)
    summary, meta = _read(d / "summary.json"), _read(d / "meta.json")
    if case == "retry_after_nonascii":
        return [] if all("ignored" in (r.get("error") or "") for r in records) else [
            "a record's error does not say the Retry-After was ignored"]
    if case in ("transcription_invalid_utf8", "endless_tokens_1m"):
        return []
    if summary is None:
        return ["no summary.json"]
    bad = []
    if case in RUNNING:
        after = (meta or {}).get("running_after") or {}
        cancel = summary.get("cancel") or {}
        if after.get("leaked") is not None or after.get("value") is not None:
            bad.append(f"meta.json running_after {after} gives a verdict on a gauge that is "
                       "not a count")
        if cancel.get("leaked") is not None or "unknown" not in str(cancel.get("leaked_reason")):
            bad.append(f"summary cancel.leaked {cancel.get('leaked')!r}, reason "
                       f"{cancel.get('leaked_reason')!r}: not unknown with the reason")
        return bad
    sm = summary.get("server_metrics") or {}
    fig = (sm.get("figures") or {}).get("prefix_cache_hit_rate") or {}
    rate = fig.get("value")
    if rate is not None and not 0 <= rate <= 1:
        bad.append(f"prefix-cache hit rate {rate} outside [0, 1]")
    if case == "counter_reset" and sm.get("status") == "measured" and (
            rate is not None or "went down" not in str(fig.get("reason"))):
        bad.append(f"a counter reset gave {rate!r} ({fig.get('reason')!r})")
    if case == "prefix_hits_over" and sm.get("status") == "measured" and (
            rate is not None or "> prefix-cache queries" not in str(fig.get("reason"))):
        bad.append(f"hits > queries gave {rate!r} ({fig.get('reason')!r})")
    pc = (summary.get("prefix_cache") or {}).get("server_hit_rate")
    if pc is not None and not 0 <= pc <= 1:
        bad.append(f"prefix_cache.server_hit_rate {pc} outside [0, 1]")
    return bad
