"""What the whole test session shares: its own JAX caches, one real JAX server, one calibration server.

Caches: the built-in JAX server keeps compiled programs in ~/.cache/loadgen/jax-compile and its FFI
kernel in ~/.cache/loadgen/kernels for real use; the suite never writes there. At start-up it points
SERVERS_JAX_CACHE_DIR and JAX_COMPILATION_CACHE_DIR (the compilation cache, honoured by servers/jax:
compile_cache_dir) and SERVERS_JAX_KERNEL_DIR at one temporary directory of this session, removed at
its end. Every JAX server of the session (the shared one, a test's own, the managed ones `loadgen run`
starts, the in-process engines) inherits them, so identical programs compile once per session. A
variable already set is kept (SERVERS_JAX_CACHE_DIR=DIR keeps a warm cache between local runs).

Servers: ``jax_server`` is one real `python -m servers.jax` (tiny preset, 4 slots, seed 0, context
256) started on first use and stopped when the session ends; each test gets it idle (nothing running
or waiting) and keeps its own output under tmp_path. Tests never read what another left: the server
is stateless across requests but for counters, which tests compare before/after. ``jax_url`` is its
base URL. A test that needs other flags starts its own (tests/servers/jax/server_proc.start_server).

``calib_server`` is a ``servers.calib.CalibrationServer`` (subprocess on 127.0.0.1, zero default
delays) for the whole session; tests pick timings and faults per request through the ``calib``
object of the request body and find their own requests in its log by their prompt, so one server
serves every test (tests/loadgen, tests/analysis/contract).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from servers.calib import CalibrationServer
from tests.servers.jax.server_proc import ServerProc, start_server

_MADE: list[str] = []                       # directories this session created (removed at its end)


def pytest_configure(config):
    own = None
    for var in ("SERVERS_JAX_CACHE_DIR", "SERVERS_JAX_KERNEL_DIR"):
        if var not in os.environ:
            if own is None:
                own = tempfile.mkdtemp(prefix="loadgen-tests-jax-")
                _MADE.append(own)
            sub = Path(own) / ("compile" if var == "SERVERS_JAX_CACHE_DIR" else "kernels")
            sub.mkdir()
            os.environ[var] = str(sub)
            if var == "SERVERS_JAX_CACHE_DIR":
                os.environ["JAX_COMPILATION_CACHE_DIR"] = str(sub)


JAX_FIXTURES = {"jax_server", "jax_url", "_jax_session_server"}


@pytest.hookimpl(tryfirst=True)           # before `-m` deselects: the mark counts there
def pytest_collection_modifyitems(config, items):
    """A test on the session's JAX server is ``slow``: starting it compiles the model, minutes
    on CI's two cores (``pytest -m slow`` runs them; the default suite stays within budget)."""
    for it in items:
        if JAX_FIXTURES & set(getattr(it, "fixturenames", ())):
            it.add_marker(pytest.mark.slow)


def pytest_unconfigure(config):
    while _MADE:
        shutil.rmtree(_MADE.pop(), ignore_errors=True)


@pytest.fixture(scope="session")
def jax_cache_dir(tmp_path_factory) -> Path:
    """The session's JAX compilation cache (the directory SERVERS_JAX_CACHE_DIR names)."""
    d = os.environ.get("SERVERS_JAX_CACHE_DIR", "")
    if d.strip().lower() in ("", "off", "0", "none"):        # the user turned it off: a private one
        return tmp_path_factory.mktemp("jax-compilation-cache")
    return Path(d)


@pytest.fixture(scope="session")
def _jax_session_server(tmp_path_factory, jax_cache_dir) -> ServerProc:
    srv = start_server(tmp_path_factory.mktemp("jax-server"), ["--slots", "4", "--seed", "0"], jax_cache_dir)
    yield srv
    srv.stop()


@pytest.fixture
def jax_server(_jax_session_server) -> ServerProc:
    """The session's shared real JAX server (tiny preset, 4 slots, seed 0), idle when the test starts."""
    _jax_session_server.wait_idle()
    return _jax_session_server


@pytest.fixture
def jax_url(jax_server) -> str:
    return jax_server.base_url


@pytest.fixture(scope="session")
def calib_server():
    with CalibrationServer() as server:
        yield server
