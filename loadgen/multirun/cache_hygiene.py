"""Prefix-cache hygiene in a sweep: every point re-sends the same seeded prompt stream to the same
server, so from the second point on a prefix cache can answer from what earlier points left.

    before a point (not the first): sweep.reset_prefix_cache ─► POST {base}/reset_prefix_cache
        (vLLM exposes it in its development mode: VLLM_SERVER_DEV_MODE=1) ─► status recorded
    after the point ─► meta.json "cache_hygiene": {"prompts_seen_before", "reset", "warning"}
        ─► summary.json "warnings" (re-summarised) when prompts were seen and no reset succeeded

``prompts_seen_before`` = min(requests this point sent, the most any earlier point sent): the
points share the workload (same seed), so their streams start with the same prompts.

The warning is only given where a prefix cache can have helped (``cache_seen``, from the point's
own summary.json "prefix_cache" block): a hit reported by an answer (cached_tokens > 0) or by the
server's counters ─► warn; answers or counters that report the cache and show no hit in this
point, or a server whose scraped /metrics has no prefix-cache counters and whose answers carry no
cached_tokens ─► no prefix cache seen, no warning (said in ``cache_seen_reason``); nothing known
(no scrape, no usage details) ─► warn, as it may have.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

RESET_PATH = "/reset_prefix_cache"


def reset_prefix_cache(base_url: str, timeout_s: float = 10.0) -> dict:
    """POST the reset; {"ok", "status", "detail"} — a server without it answers 404 (recorded)."""
    req = urllib.request.Request(base_url.rstrip("/") + RESET_PATH, data=b"", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return {"ok": 200 <= r.status < 300, "status": r.status, "detail": None}
    except urllib.error.HTTPError as e:
        return {"ok": False, "status": e.code,
                "detail": f"HTTP {e.code} from {RESET_PATH} (vLLM serves it only with "
                          "VLLM_SERVER_DEV_MODE=1)"}
    except (urllib.error.URLError, OSError) as e:
        return {"ok": False, "status": None, "detail": f"{type(e).__name__}: {e}"}


def sent_count(run_dir: Path) -> int:
    """Requests of a run that were sent (warm-up included): records.jsonl's lines, or
    records.arrow's ``sent_at_ns`` column a record batch at a time (output.records: arrow)."""
    if (Path(run_dir) / "records.arrow").is_file():
        from analysis.contract.columnar import batches
        return sum(b.num_rows - b.column("sent_at_ns").null_count
                   for b in batches(Path(run_dir) / "records.arrow"))
    n = 0
    try:
        with open(run_dir / "records.jsonl", encoding="utf-8") as f:
            for line in f:
                try:
                    n += json.loads(line).get("sent_at_ns") is not None
                except ValueError:
                    continue
    except OSError:
        return 0
    return n


def cache_seen(summary: Optional[dict]) -> tuple[Optional[bool], str]:
    """Could a prefix cache have lowered this point's TTFT? (True, False or None: unknown), why."""
    pc = (summary or {}).get("prefix_cache") or {}
    rate = pc.get("server_hit_rate")
    hits, misses = pc.get("requests_hit") or 0, pc.get("requests_miss") or 0
    if hits or (isinstance(rate, (int, float)) and rate > 0):
        return True, (f"{hits} answers reported cached prompt tokens" if hits else
                      f"the server's counters show a prefix-cache hit rate of {rate:.1%}")
    if misses or rate == 0:
        return False, "the server reports its prefix cache and shows no hit in this point"
    why = (pc.get("reasons") or {}).get("server_hit_rate") or ""
    if "no prefix-cache counters" in why:
        return False, ("no prefix cache seen: the server's /metrics has no prefix-cache counters "
                       "and its answers carry no cached_tokens")
    return None, "unknown: neither the answers nor the server's /metrics say"


def hygiene(sent_now: int, sent_before: int, reset: Optional[dict],
            summary: Optional[dict] = None) -> dict:
    seen = min(sent_now, sent_before)
    cache, why = cache_seen(summary)
    out = {"prompts_seen_before": seen, "reset": reset, "warning": None,
           "cache_seen": cache, "cache_seen_reason": why,
           "rule": "points share the seeded prompt stream: min(sent now, most sent earlier)"}
    if seen and cache is not False and not (reset and reset.get("ok")):
        out["warning"] = (f"{seen} prompts of this point were sent to the same server earlier in "
                          "this sweep: prefix-cache hits can lower TTFT (set "
                          "sweep.reset_prefix_cache: true for a server that exposes "
                          f"{RESET_PATH})" + (f"; reset failed: {reset['detail']}" if reset else ""))
    return out
