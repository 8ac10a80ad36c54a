"""What a bench's run wrote, counted: records.jsonl lines ─► counts by phase/status, causes of the rest.

    a record (dict) ─► count(r, counts, errors): counts["measured/ok"] += 1; a non-ok one also
                       errors["<error_kind>: <error, first 80 chars>"] += 1
    counts, errors  ─► print_counts(counts, errors, most): one indented line each (the `most` most
                       common causes)

A helper of held_streams.py and many_streams.py (not a bench itself).
"""
from __future__ import annotations

import collections


def count(r: dict, counts: collections.Counter, errors: collections.Counter) -> None:
    counts[f"{r['phase']}/{r['status']}"] += 1
    if r["status"] != "ok":
        errors[f"{r.get('error_kind')}: {(r.get('error') or '')[:80]}"] += 1


def print_counts(counts: collections.Counter, errors: collections.Counter, most: int) -> None:
    for k, v in sorted(counts.items()):
        print(f"  {k:24s} {v:>8,}")
    for k, v in errors.most_common(most):
        print(f"  {v:>8,}  {k}")
