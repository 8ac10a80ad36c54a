"""Prometheus text exposition ─► samples: what the scrape worker parses from a /metrics body.

    parse_samples(text) ─► [(sample name, labels dict, value, is_gauge)]; ``_created`` samples and
        the client library's own process metrics (SKIP_PREFIXES) left out
        fast path   _fast(): a line at a time, prometheus_client's family rules kept exactly, for
                    the plain exposition servers write (~5x faster on vLLM's /metrics)
        otherwise   parse_samples_reference(): prometheus_client's own parser, on the whole text
"""
from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

SKIP_PREFIXES = ("python_", "process_")      # the client library's own process metrics


def parse_samples_reference(text: str,
                            skip_prefixes: tuple[str, ...] = SKIP_PREFIXES) -> list[tuple]:
    """prometheus_client's parser: exact for any exposition text, ~20 ms for vLLM's 600 lines."""
    out = []
    for fam in text_string_to_metric_families(text):
        if fam.name.startswith(skip_prefixes):
            continue
        gauge = fam.type == "gauge"
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out.append((s.name, dict(s.labels), float(s.value), gauge))
    return out


_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"(?:,|$)')
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_ALLOWED = {"counter": ("",), "gauge": ("",), "summary": ("_count", "_sum", ""),
            "histogram": ("_count", "_sum", "_bucket")}


class _Slow(Exception):
    """Something the fast path does not handle: parse the whole text the reference way."""


def _fast(text: str, skip_prefixes: tuple[str, ...]) -> list[tuple]:
    """prometheus_client's text_fd_to_metric_families, its family rules kept exactly (a sample
    belongs to the family of the # HELP / # TYPE above it only under an allowed name, else it is
    an untyped family of its own and the context is reset), for plain lines only."""
    name, typ, allowed = "", "untyped", ()
    out = []
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) < 2 or (len(parts) > 2 and parts[1] not in ("TYPE", "HELP")):
                continue                                   # a comment
            if len(parts) < 3 or not _NAME.fullmatch(parts[2]):
                raise _Slow(line)                          # quoted / odd: the reference decides
            cand = parts[2]
            if parts[1] == "HELP":
                if cand != name:
                    name, typ, allowed = cand, "untyped", (cand,)
            else:
                if len(parts) < 4:
                    raise _Slow(line)
                name, typ = cand, parts[3]
                allowed = tuple(name + x for x in _ALLOWED.get(typ, ("",)))
            continue
        m = _SAMPLE.fullmatch(line)
        if m is None:
            raise _Slow(line)
        sname, labels_text, value = m.groups()
        if sname in allowed:
            fam, gauge = name, typ == "gauge"
            if typ == "counter" and not name.endswith("_total"):
                sname += "_total"              # the reference's OpenMetrics munging of counters
        else:                                               # an untyped singleton family
            fam, gauge = sname, False
            name, typ, allowed = "", "untyped", ()
        if fam.startswith(skip_prefixes) or sname.endswith("_created"):
            continue
        labels = {}
        if labels_text:
            pos = 0
            for lm in _LABEL.finditer(labels_text):
                if lm.start() != pos:
                    raise _Slow(line)
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
            if pos != len(labels_text) or "__name__" in labels:
                raise _Slow(line)               # escapes, spaces, ...: the reference parses it
        out.append((sname, labels, float(value), gauge))
    return out


def parse_samples(text: str, skip_prefixes: tuple[str, ...] = SKIP_PREFIXES) -> list[tuple]:
    """Prometheus text ─► [(sample name, labels dict, value, is_gauge)]; ``_created`` dropped.

    A line-at-a-time fast path (~5x faster than prometheus_client on vLLM's /metrics) for the
    plain exposition servers write: every sample under a ``# TYPE``, label values without
    escapes. Anything else (an escaped quote, an untyped sample, a line it cannot read) sends the
    whole text to prometheus_client's parser (``parse_samples_reference``), whose answers the
    fast path matches (tests/loadgen/targets/test_scrape.py)."""
    try:
        return _fast(text, skip_prefixes)
    except (_Slow, ValueError):
        return parse_samples_reference(text, skip_prefixes)
