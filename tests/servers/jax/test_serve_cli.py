"""`python -m servers.jax` flag handling: bad flags give one clear line naming the flag and exit 2."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.servers.jax.server_proc import REPO

BAD_FLAGS = [
    (["--slots", "0"], "--slots"),
    (["--max-queue", "0"], "--max-queue"),
    (["--interleave-chunk", "-1"], "--interleave-chunk"),
    (["--port", "70000"], "--port"),
    (["--port", "abc"], "--port"),
    (["--max-model-len", "1"], "--max-model-len"),
    (["--preset", "nope"], "--preset"),
    (["--dtype", "fp8"], "--dtype"),
    (["--preset", "tiny", "--model", "/tmp"], "--model"),
    (["--model", "/definitely/not/here"], "--model"),
    (["--api-key", " "], "--api-key"),
    (["--bogus"], "--bogus"),
    (["--prefix-cache", "yes"], "--prefix-cache"),
    (["--prefix-block", "0"], "--prefix-block"),
    (["--prefix-cache-blocks", "0"], "--prefix-cache-blocks"),
    (["--prefix-cache", "on", "--interleave-chunk", "0"], "--prefix-cache"),
]


@pytest.mark.parametrize("argv,flag", BAD_FLAGS)
def test_bad_flag_one_line_exit_2(argv, flag):
    r = subprocess.run([sys.executable, "-m", "servers.jax", *argv], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and lines[0].startswith("servers.jax: error:"), r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_help_exits_0():
    r = subprocess.run([sys.executable, "-m", "servers.jax", "--help"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "--max-queue" in r.stdout and "127.0.0.1" in r.stdout
