"""servers/jax/kernels with more than one thread: the columns (or, at M = 1, the rows of W) split
over XLA's intra-op threads give the same y as XLA's dot on odd shapes; the thread count follows
the CPU affinity (a process pinned to one core stays single-threaded) unless forced."""
from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from servers.jax import kernels
from servers.jax.kernels import build as B
from servers.jax.kernels import dispatch as D

from .conftest import REPO


@pytest.fixture
def lib(kernel_dir, monkeypatch):
    monkeypatch.setenv("SERVERS_JAX_KERNEL_DIR", str(kernel_dir))
    monkeypatch.delenv(D.THREADS_ENV, raising=False)
    info = kernels.configure("ffi")
    assert info["mode"] == "ffi", info["reason"]
    yield B.loaded_lib()
    kernels.configure("xla", threads=0)


def _close(got, want):
    want = np.asarray(want, np.float64)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=2e-6 * max(1.0, np.abs(want).max()))


# odd N (parts of 16 columns and a ragged last part), odd K (M = 1 splits K: uneven row halves),
# N below one part (a single thread), M on both sides of the packed-tile switch (24)
SHAPES = [(13, 29), (129, 385), (37, 8), (5, 47), (768, 1283), (3, 4099)]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("k,n", SHAPES)
def test_split_over_threads_equals_xla_dot(lib, threads, k, n):
    D.set_threads(threads)
    rng = np.random.default_rng(k * 7 + n + threads)
    nn, nt = jax.jit(D.ffi_nn), jax.jit(D.ffi_nt)
    w = jnp.asarray(rng.standard_normal((k, n), np.float32))
    e = jnp.asarray(rng.standard_normal((n, k), np.float32))
    for m in (1, 2, 7, 23, 24, 33):
        x = jnp.asarray(rng.standard_normal((m, k), np.float32))
        for _ in range(3):      # repeated: a helper thread that ran late must not touch a later call
            _close(nn(x, w), x @ w)
            _close(nt(x, e), x @ e.T)


def test_affinity_threads_on_a_large_product(lib):
    """Not forced: a product over 1 MiB of weights takes as many threads as the affinity allows."""
    k, n = 768, 1400
    rng = np.random.default_rng(1)
    w = jnp.asarray(rng.standard_normal((k, n), np.float32))
    for m in (1, 8, 32):
        x = jnp.asarray(rng.standard_normal((m, k), np.float32))
        _close(jax.jit(D.ffi_nn)(x, w), x @ w)
    cpus = len(os.sched_getaffinity(0))
    assert lib.lg_affinity_cpus() == cpus
    assert lib.lg_threads_for(8, k, n, 2) == min(cpus, 8)


def test_thread_count_rules(lib):
    big = (8, 768, 4096)
    D.set_threads(0)
    assert lib.lg_threads_for(8, 64, 64, 2) == 1          # 16 KiB of weights: never worth a hand-off
    assert lib.lg_threads_for(*big, 0) == 1               # no XLA pool: the caller alone
    D.set_threads(2)
    assert lib.lg_threads_for(8, 64, 64, 2) == 2          # forced: even small products
    assert lib.lg_threads_for(8, 64, 20, 2) == 2 and lib.lg_threads_for(8, 64, 16, 2) == 1  # >= 16 cols each
    D.set_threads(64)
    assert lib.lg_threads_for(*big, 2) == 8               # at most 8
    with pytest.raises(ValueError, match="0..64"):
        D.set_threads(65)


def test_pinned_process_stays_single_threaded(kernel_dir):
    """A process pinned to one CPU (taskset, or the benches' sched_setaffinity) gets one thread."""
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
            "from servers.jax import kernels\nfrom servers.jax.kernels import build as B\n"
            "i = kernels.configure('ffi'); lib = B.loaded_lib()\n"
            "print(i['mode'], i['threads']['affinity_cpus'], lib.lg_affinity_cpus(), "
            "lib.lg_threads_for(8, 768, 4096, 2))")
    env = dict(os.environ, SERVERS_JAX_KERNEL_DIR=str(kernel_dir), JAX_PLATFORMS="cpu")
    env.pop(D.THREADS_ENV, None)
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.split() == ["ffi", "1", "1", "1"]


def test_threads_env_forces_and_bad_values_name_the_variable(kernel_dir, monkeypatch):
    monkeypatch.setenv("SERVERS_JAX_KERNEL_DIR", str(kernel_dir))
    monkeypatch.setenv(D.THREADS_ENV, "2")
    try:
        info = kernels.configure("ffi")
        assert info["threads"]["forced"] == 2 and B.loaded_lib().lg_threads_for(1, 8, 64, 2) == 2
        for bad in ("two", "-1", "65"):
            monkeypatch.setenv(D.THREADS_ENV, bad)
            with pytest.raises(ValueError, match=D.THREADS_ENV):
                kernels.configure("ffi")
    finally:
        monkeypatch.delenv(D.THREADS_ENV)
        kernels.configure("xla")
    assert kernels.describe()["threads"]["forced"] is None


def test_call_site_single_thread_attribute_and_auto_records_the_choice(lib, monkeypatch):
    D.set_threads(2)                              # the policy splits every product ...
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((3, 37), np.float32))
    w = jnp.asarray(rng.standard_normal((37, 101), np.float32))
    _close(jax.jit(lambda a, b: D.ffi_nn(a, b, 1))(x, w), x @ w)       # ... but not this call site
    _close(jax.jit(lambda a, b: D.ffi_nt(a, b, 1))(x, w.T), x @ w)
    monkeypatch.setenv(D.THREADS_ENV, "2")
    kernels.configure("auto")
    f = jax.jit(lambda a, b: kernels.matmul(a, b) + 1)
    _close(f(x, w), x @ w + 1)
    entry = kernels.describe()["shapes"]["nn M=3 K=37 N=101"]
    assert entry["use"] in ("ffi", "xla") and ("threads" in entry) == (entry["use"] == "ffi")
    if entry["use"] == "ffi":
        assert entry["threads"] in (0, 1)
        assert ("loadgen_matmul" in str(jax.make_jaxpr(lambda a, b: kernels.matmul(a, b))(x, w)))
