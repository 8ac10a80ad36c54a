"""Secrets never written (loadgen/redact.py): registered values are masked wherever they appear."""
from __future__ import annotations

import json

import pytest

from loadgen import redact
from loadgen.client.request import request_headers
from loadgen.record import Record, RecordWriter, read_records


@pytest.fixture(autouse=True)
def clean():
    redact.clear()
    yield
    redact.clear()


class Api:
    stream = True
    headers = {"X-Api-Key": "k-123456789", "X-Trace": "not-a-secret-value"}


def test_request_headers_register_the_key_and_secret_header_values():
    request_headers(Api(), "sk-test-abcdef")
    text = 'HTTP 429: {"echo": "Bearer sk-test-abcdef", "k": "k-123456789", "t": "not-a-secret-value"}'
    out = redact.redact(text)
    assert "sk-test-abcdef" not in out and "k-123456789" not in out
    assert "not-a-secret-value" in out and out.count(redact.MASK) == 2


def test_short_values_are_not_registered():
    redact.register("abc", None, "")
    assert redact.secrets() == () and redact.redact("abc") == "abc"


def test_the_json_escaped_form_is_masked_too():
    secret = 'sk-"quoted"\\x'
    redact.register(secret)
    line = json.dumps({"error": f"echo {secret}"})
    assert secret not in json.loads(redact.redact(line))["error"]


def test_records_are_written_without_the_secret(tmp_path):
    redact.register("sk-live-0123456789")
    r = Record(id=0, phase="measured", scheduled_at_ns=0)
    r.error = "401: invalid key sk-live-0123456789"
    r.retry_error = "echo Bearer sk-live-0123456789"
    with RecordWriter(tmp_path / "records.jsonl") as w:
        w.write(r)
    raw = (tmp_path / "records.jsonl").read_text()
    assert "sk-live-0123456789" not in raw
    assert read_records(tmp_path / "records.jsonl")[0]["error"] == "401: invalid key [REDACTED]"


def test_a_secret_cut_short_by_a_snippet_is_masked_from_its_first_characters():
    redact.register("sk-test-1b66f9025da0ba5114cfdd")
    cut = 'HTTP 429: {"auth": "Bearer sk-test-1b66f90'        # the body snippet ends inside it
    assert redact.redact(cut) == 'HTTP 429: {"auth": "Bearer [REDACTED]'
    mid = "bad JSON: b'sk-test-1b6' and more"                   # cut, then quoted
    assert redact.redact(mid) == "bad JSON: b'[REDACTED]' and more"
    assert redact.redact("sk-test-") == "[REDACTED]"
    assert redact.redact("sk-tes") == "sk-tes"                  # under PREFIX: not masked


def test_one_rule_for_headers_server_args_and_url_queries(tmp_path):
    """THE rule (redact.SECRET_WORDS) registers X-Auth, Cookie, a managed server's --api-key /
    HF_TOKEN and a metrics URL's ?token= alike; scenario.yaml masks them too."""
    from loadgen.run.rundir import api_key, resolved_yaml
    from loadgen.scenario.loader import scenario_from_dict
    sc = scenario_from_dict({
        "target": {"server": {"kind": "command", "command": ["x", "{port}"],
                              "args": {"api-key": "srv-arg-secret-1"},
                              "env": {"HF_TOKEN": "hf_env_secret_2"}},
                   "metrics_path": "http://127.0.0.1:9/metrics?token=qq1&page=2"},
        "api": {"headers": {"X-Auth": "xauth-secret-3", "Cookie": "c=cookie-secret-4",
                            "X-Trace": "not-a-secret-5"}},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 1},
        "output": {"dir": str(tmp_path)}})
    api_key(sc)
    text = ("srv-arg-secret-1 hf_env_secret_2 xauth-secret-3 c=cookie-secret-4 "
            "GET /metrics?token=qq1&page=2 not-a-secret-5")
    out = redact.redact(text)
    for s in ("srv-arg-secret-1", "hf_env_secret_2", "xauth-secret-3", "cookie-secret-4", "qq1"):
        assert s not in out
    assert "not-a-secret-5" in out and "page=2" in out
    y = resolved_yaml(sc)
    assert "xauth-secret-3" not in y and "qq1" not in y and "not-a-secret-5" in y
