"""Secrets never written: the API key and secret-looking header values, replaced wherever they appear.

    request.request_headers (the one place request headers are built) ─► register(values)
    any text loadgen writes or prints ─► redact(text): every registered value ─► ``[REDACTED]``
        records.jsonl lines (record.RecordWriter), run-directory JSON (run.storage), console
        error lines (cli), record fields (redact_record: error, retry_error, output_text)

A server that echoes the Authorization header into an error body, a stream's error event or a
response header cannot get the key into a file or onto the terminal: the redaction runs on the
final text, whatever path it took. Process-wide: Locust workers register in their own process.

THE rule (docs/secrets.md), one for every writer: a name is secret when it contains one of
``SECRET_WORDS`` (auth, key, token, secret, passw, cookie, credential; any case): the values of
such request headers (api.headers: ``X-Auth``, ``X-Api-Key``, ``Authorization``, ``Cookie``),
managed-server args/env keys in scenario.yaml, and URL query parameters (``?api_key=...``:
``register_url``). A URL's user:password@ is refused up front (loadgen.scenario.target), never
sent or written. A value is registered whole and, for ``Bearer x`` / ``Basic x``, also its
credential ``x``; values shorter than ``MIN_LEN`` are not registered alone (redacting two letters
everywhere would garble the output) — a query parameter's ``name=value`` is, whatever its length.
Its JSON-escaped form is registered too.
"""
from __future__ import annotations

import json
import re
import threading
from typing import Iterable, Optional

MASK = "[REDACTED]"
MIN_LEN = 6
PREFIX = 8                       # a secret cut short still shows this many leading characters
SECRET_WORDS = ("auth", "key", "token", "secret", "passw", "cookie", "credential")
SECRET_NAME = re.compile("|".join(SECRET_WORDS), re.I)


def secret_name(name) -> bool:
    """THE rule: a header, parameter, argument or variable name whose value is a secret."""
    return bool(SECRET_NAME.search(str(name)))

_lock = threading.Lock()
_secrets: tuple = ()             # longest first, so a credential inside its header value goes last


def register(*values: Optional[str]) -> None:
    """Add secret values (``None`` and short ones are skipped)."""
    global _secrets
    new = set(_secrets)
    for v in values:
        if not isinstance(v, str):
            continue
        v = v.strip()
        parts = [v]
        scheme, _, cred = v.partition(" ")
        if cred and scheme.lower() in ("bearer", "basic", "token"):
            parts.append(cred.strip())
        for p in parts:
            if len(p) >= MIN_LEN:
                new.add(p)
                esc = json.dumps(p)[1:-1]
                if esc != p:
                    new.add(esc)
    with _lock:
        _secrets = tuple(sorted(new, key=len, reverse=True))


def register_headers(headers: dict) -> None:
    """Register the values of every header whose name looks secret."""
    register(*(str(v) for k, v in headers.items() if secret_name(k)))


def register_url(url: Optional[str]) -> None:
    """Register the secret-looking query parameters of ``url`` (``?api_key=v``): ``v`` and
    ``api_key=v`` (raw and percent-decoded), so the URL is masked wherever it is written."""
    if not url or "?" not in url:
        return
    from urllib.parse import unquote, urlsplit
    global _secrets
    new = set(_secrets)
    for pair in urlsplit(url).query.split("&"):
        name, eq, value = pair.partition("=")
        if not eq or not value or not secret_name(unquote(name)):
            continue
        for form in {pair, f"{unquote(name)}={unquote(value)}"}:
            new.add(form)
        for v in {value, unquote(value)}:
            if len(v) >= MIN_LEN:
                new.add(v)
    with _lock:
        _secrets = tuple(sorted(new, key=len, reverse=True))


def secrets() -> tuple:
    return _secrets


def clear() -> None:
    """Forget every registered value (tests)."""
    global _secrets
    with _lock:
        _secrets = ()


def redact(text: Optional[str]) -> Optional[str]:
    """``text`` with every registered secret replaced by ``MASK``; also a secret cut short (an
    error snippet that ends inside it): from its first ``PREFIX`` characters on, as far as the
    text still matches it."""
    if not text or not _secrets:
        return text
    for s in _secrets:
        if s in text:
            text = text.replace(s, MASK)
    for s in _secrets:
        if len(s) > PREFIX and s[:PREFIX] in text:
            text = _cut_short(text, s)
    return text


def _cut_short(text: str, s: str) -> str:
    out, i, head = [], 0, s[:PREFIX]
    while True:
        j = text.find(head, i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        k = PREFIX
        while k < len(s) and j + k < len(text) and text[j + k] == s[k]:
            k += 1
        out += [text[i:j], MASK]
        i = j + k


def redact_all(texts: Iterable[str]) -> list:
    return [redact(t) for t in texts]


def redact_record(rec) -> None:
    """The free-text fields of a Record (anything with these attributes), in place."""
    if not _secrets:
        return
    for name in ("error", "retry_error", "output_text"):
        v = getattr(rec, name, None)
        if v:
            setattr(rec, name, redact(v))
