"""THE redaction rule (loadgen/redact.py, docs/secrets.md) on real ``python -m loadgen`` runs: a
server that echoes every request header in a 400 (servers.hostile ``echo_headers_400``), secrets
in ``X-Auth``, ``Cookie``, ``api_key_env`` and a metrics URL's ``?token=``; then every file of
the run directory (report.html included), stdout and stderr are scanned, on the native engine,
with ``--procs 2``, in ``loadgen sweep`` and on the Locust engine. A URL with user:password@ is
refused in one line (exit 2) without echoing it."""
from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from servers.hostile.server import HostileServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def echo_server():
    with HostileServer("echo_headers_400") as s:
        yield s


def secret_set() -> dict:
    return {"X-Auth": "xauth-" + secrets.token_hex(12), "Cookie": "sess=" + secrets.token_hex(12),
            "key": "sk-test-" + secrets.token_hex(12), "query": "qtok" + secrets.token_hex(10)}


def scenario(tmp_path: Path, url: str, s: dict, **extra) -> Path:
    sc = {"name": "leak", "target": {"url": url, "metrics_path": f"{url}/metrics?token={s['query']}"},
          "api": {"probe": False, "api_key_env": "LEAK_KEY", "timeout_s": 10,
                  "headers": {"X-Auth": s["X-Auth"], "Cookie": s["Cookie"]}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 6},
          "output": {"dir": str(tmp_path / "out"), "report": "full"}, **extra}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    return p


def needles(s: dict) -> list[str]:
    cookie = s["Cookie"].split("=", 1)[1]
    return [s["X-Auth"], s["X-Auth"][6:], cookie, s["key"], s["key"][8:], s["query"]]


def scan(root: Path, s: dict, *texts: str) -> list[str]:
    """Where any secret (or a long piece of one) is found: file paths, or "stdout"/"stderr"."""
    found = []
    hay = needles(s)
    for dirpath, _, files in os.walk(root):
        for f in files:
            data = (Path(dirpath) / f).read_bytes().decode("utf-8", "replace")
            if any(n in data for n in hay):
                found.append(str(Path(dirpath) / f))
    for name, t in zip(("stdout", "stderr"), texts):
        if any(n in t for n in hay):
            found.append(name)
    return found


def loadgen(args: list, s: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "LEAK_KEY": s["key"]}
    return subprocess.run([sys.executable, "-m", "loadgen", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("extra", [[], ["--procs", "2"]], ids=["native", "procs2"])
def test_no_secret_in_any_file_of_a_run(echo_server, tmp_path, extra):
    s = secret_set()
    r = loadgen(["run", str(scenario(tmp_path, echo_server.url, s)), *extra], s)
    assert r.returncode == 3, r.stderr                # every request a 400: nothing completed
    assert "Traceback" not in r.stderr
    run_dir = next((tmp_path / "out").iterdir())
    assert (run_dir / "report.html").is_file() and (run_dir / "records.jsonl").is_file()
    echoed = (run_dir / "records.jsonl").read_text()
    assert "x-auth: [REDACTED]" in echoed               # the server did echo it
    assert scan(tmp_path / "out", s, r.stdout, r.stderr) == []


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_no_secret_in_a_sweep(echo_server, tmp_path):
    s = secret_set()
    p = scenario(tmp_path, echo_server.url, s,
                 sweep={"param": "load.concurrency", "values": [1, 2]})
    r = loadgen(["sweep", str(p)], s)
    assert "Traceback" not in r.stderr, r.stderr
    assert any(f.name == "report.html" for f in (tmp_path / "out").rglob("report.html"))
    assert scan(tmp_path / "out", s, r.stdout, r.stderr) == []


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_no_secret_on_the_locust_engine(echo_server, tmp_path):
    # find_spec, not importorskip: importing locust would monkey-patch this pytest process
    # (gevent), and every later test's threads and subprocesses with it
    if importlib.util.find_spec("locust") is None:
        pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')")
    s = secret_set()
    r = loadgen(["run", str(scenario(tmp_path, echo_server.url, s)), "--engine", "locust",
                 "--workers", "1"], s)
    assert "Traceback" not in r.stderr, r.stderr
    assert (tmp_path / "out").is_dir() and any((tmp_path / "out").rglob("records.jsonl"))
    assert scan(tmp_path / "out", s, r.stdout, r.stderr) == []


@pytest.mark.parametrize("url,with_key", [
    ("http://alice:{pw}@127.0.0.1:9", False),
    ("http://alice:{pw}@127.0.0.1:9", True),          # was aiohttp's "Cannot combine" traceback
    ("http://127.0.0.1:9/?api_key={pw}", False),
])
def test_credentials_in_the_url_are_refused_in_one_line(tmp_path, url, with_key):
    pw = "pw-" + secrets.token_hex(10)
    s = {"X-Auth": "xauth-unused-0000", "Cookie": "c=unused-0000", "key": "sk-test-unused",
         "query": pw}
    p = scenario(tmp_path, url.format(pw=pw), s)
    if not with_key:
        tree = yaml.safe_load(p.read_text())
        del tree["api"]["api_key_env"]
        p.write_text(yaml.safe_dump(tree))
    r = loadgen(["run", str(p)], s, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "target.url: " in lines[0], r.stderr
    assert pw not in r.stderr and pw not in r.stdout
    assert not (tmp_path / "out").exists() or scan(tmp_path / "out", s) == []
