"""`python -m servers.calib` / `loadgen serve calib` (servers/calib/serve.py, process.py,
loadgen/commands/serve.py): flags checked in one line, a PORT line, then known timing."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from servers.calib import CalibrationServer
from servers.calib.serve import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("argv,msg", [
    (["--ttft-ms", "-1"], "--ttft-ms: must be >= 0, got -1"),
    (["--itl-ms", "nan"], "--itl-ms: must be >= 0, got nan"),
    (["--tokens-per-chunk", "0"], "--tokens-per-chunk: must be >= 1, got 0"),
    (["--port", "70000"], "--port: must be 0..65535, got 70000"),
])
def test_bad_flags_are_one_line_exit_2(capsys, argv, msg):
    assert main(argv, prog="loadgen serve calib") == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"loadgen serve calib: error: {msg}"]


def test_loadgen_serve_calib_help(capsys):
    from loadgen.cli import main as cli
    assert cli(["serve", "calib", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: loadgen serve calib" in out and "--ttft-ms" in out and "--lockstep" in out


def test_a_taken_port_is_one_line_exit_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "servers.calib", "--port", str(port)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith(f"servers.calib: error: --port {port}:")


def test_subprocess_serves_the_timing_it_was_given():
    with CalibrationServer(ttft_ms=30, itl_ms=5, lockstep=True) as s:
        body = json.dumps({"model": "calib-model", "prompt": "p", "max_tokens": 3,
                           "stream": True}).encode()
        req = urllib.request.Request(f"{s.url}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert b"data: [DONE]" in r.read()
        (entry,) = s.log(clear=True)
        first = next(t for t, n in entry["chunks"] if n > 0)
        assert first >= entry["arrival_ns"] + 30_000_000 - 1_000_000
        assert s.log() == [] and s.clock()[0]["itl_ns"] == 5_000_000
    assert s.proc.poll() is not None
