"""`python -m servers.jax` flag handling: bad flags give one clear line naming the flag and exit 2."""
from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from tests.servers.jax.server_proc import REPO

# each bad argv (shell words) and the flag its one line names: the first word, or NAMED's
BAD_ARGV = [
    "--slots 0", "--max-queue 0", "--interleave-chunk -1", "--port 70000", "--port abc",
    "--max-model-len 1", "--preset nope", "--dtype fp8", "--preset tiny --model /tmp",
    "--model /definitely/not/here", "--api-key ' '", "--bogus", "--prefix-cache yes",
    "--prefix-block 0", "--prefix-cache-blocks 0", "--prefix-cache on --interleave-chunk 0",
    "--served-model-name a,,b", "--served-model-name 'a, b'"]
NAMED = {"--preset tiny --model /tmp": "--model"}
BAD_FLAGS = [(shlex.split(a), NAMED.get(a, a.split()[0])) for a in BAD_ARGV]


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
