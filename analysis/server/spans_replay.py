"""A run's kept OTLP export bodies, replayed: the server's own words through the live path again.

    run_dir/server_spans.raw.jsonl (server_traces.keep_raw_mb: one line per export body as it
    came, {"json": bool, "body": base64}; otlp_receiver.Receiver.keep_raw)
        ─► bodies(path): (as_json, bytes) per line; a torn or garbled line is counted, not read
        ─► replay(path): a fresh Receiver on 127.0.0.1 (port 0), each body POSTed to it with its
           content type (the same checks, bounds and decoding as during the run), its snapshot
           {"timings": {trace id: ServerTiming fields}, bad / refused / foreign counts, "skipped"}
        ─► spans_join.join_file(records, snapshot["timings"]) as after a live run

Used by tests/analysis/server/test_spans_replay.py on a recorded vLLM capture
(tests/fixtures/servers/vllm-spans/), so the decoding of vLLM's real export is checked in CI.
"""
from __future__ import annotations

import base64
import binascii
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

from analysis.server.otlp_receiver import Receiver


def bodies(path: Path, skipped: list) -> Iterator[tuple[bool, bytes]]:
    """Each kept body; ``skipped`` gets one entry per line that does not read."""
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            try:
                d = json.loads(line)
                yield bool(d["json"]), base64.b64decode(d["body"], validate=True)
            except (ValueError, KeyError, TypeError, binascii.Error):
                skipped.append(n)


def replay(path: Path) -> dict:
    """The receiver's snapshot after every kept body of ``path`` was POSTed to it again."""
    skipped: list = []
    with Receiver(0) as rx:
        for as_json, body in bodies(path, skipped):
            ctype = "application/json" if as_json else "application/x-protobuf"
            req = urllib.request.Request(rx.endpoint, data=body, method="POST",
                                         headers={"Content-Type": ctype})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    r.read()
            except urllib.error.HTTPError as e:       # refused: counted by the receiver
                e.read()
        snap = rx.snapshot()
    return {**snap, "skipped_lines": skipped}
