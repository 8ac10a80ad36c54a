"""Prefix-cache hygiene in a sweep: every point re-sends the same seeded prompt stream to the same
server, so from the second point on a prefix cache can answer from what earlier points left.

    before a point (not the first): sweep.reset_prefix_cache ─► POST {base}/reset_prefix_cache
        (vLLM exposes it in its development mode: VLLM_SERVER_DEV_MODE=1) ─► status recorded
    after the point ─► meta.json "cache_hygiene": {"prompts_seen_before", "reset", "warning"}
        ─► summary.json "warnings" (re-summarised) when prompts were seen and no reset succeeded

``prompts_seen_before`` = min(requests this point sent, the most any earlier point sent): the
points share the workload (same seed), so their streams start with the same prompts.
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
    """Requests of a run that were sent (warm-up included)."""
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


def hygiene(sent_now: int, sent_before: int, reset: Optional[dict]) -> dict:
    seen = min(sent_now, sent_before)
    out = {"prompts_seen_before": seen, "reset": reset, "warning": None,
           "rule": "points share the seeded prompt stream: min(sent now, most sent earlier)"}
    if seen and not (reset and reset.get("ok")):
        out["warning"] = (f"{seen} prompts of this point were sent to the same server earlier in "
                          "this sweep: prefix-cache hits can lower TTFT (set "
                          "sweep.reset_prefix_cache: true for a server that exposes "
                          f"{RESET_PATH})" + (f"; reset failed: {reset['detail']}" if reset else ""))
    return out
