"""Fixtures of the JAX server tests. The shared real server and the session's compilation cache are in
tests/conftest.py (``jax_server``, ``jax_cache_dir``); a server with flags of its own comes from
tests/servers/jax/server_proc.py (``start_server``; also importable from here, the names old importers
used). ``kernel_dir``: the FFI kernel's build directory, one per session (SERVERS_JAX_KERNEL_DIR, which
tests/conftest.py points at the session's temporary directory), so the library is compiled once."""
import os
from pathlib import Path

import pytest

from tests.servers.jax.server_proc import HOST, REPO, TINY_ARGS, ServerProc, free_port, start_server

__all__ = ["HOST", "REPO", "TINY_ARGS", "ServerProc", "free_port", "start_server"]


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory) -> Path:
    """The directory every FFI-kernel test builds into and loads from (g++ runs once per session)."""
    d = os.environ.get("SERVERS_JAX_KERNEL_DIR")
    return Path(d) if d else tmp_path_factory.mktemp("ffi-kernels")
