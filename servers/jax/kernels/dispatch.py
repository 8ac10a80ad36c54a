"""Which matmul a call site gets: XLA's dot or the FFI kernel, decided at trace time.

    configure("xla" | "ffi" | "auto")   once, at server start, before any model function is traced
    matmul(x, w)    = x @ w      x [M, K], w [K, N]
    matmul_t(x, e)  = x @ e.T    x [M, K], e [N, K] (tied-embedding logits; e is not transposed)

A call takes the FFI kernel when the mode is ffi or auto, the library loaded, the backend is the
CPU, both operands are 2-D float32 and 1 <= M <= MAX_M (the kernel is meant for decode's few rows;
prefill's hundreds of rows stay on XLA's dot). The kernel splits y's columns over as many of XLA's
intra-op threads as this process's CPU affinity allows (pinned to one core: one thread), or over
n threads when forced ($SERVERS_JAX_MATMUL_THREADS=n or configure(threads=n)). In auto mode each
(layout, M, K, N) is also timed once (autotune.py) and the FFI kernel kept only where it was faster.
The two kernel calls themselves are ffi.py's (autotune.py times them too).
Every decision is recorded; describe() is what the server's /info shows under "matmul".
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Optional

import jax
import jax.numpy as jnp

from .autotune import time_both
from .ffi import ffi_nn, ffi_nt  # noqa: F401 (bench/ and tests call them as dispatch.ffi_nn)

log = logging.getLogger("servers.jax.kernels")

MODES = ("xla", "ffi", "auto")
MAX_M = 96          # decode rows (<= 32 slots) + a fused prefill piece (<= 64 rows)
THREADS_ENV = "SERVERS_JAX_MATMUL_THREADS"    # n > 0 forces n threads per call; unset/0: the affinity

_lock = threading.Lock()
_state: dict = {"requested": "xla", "mode": "xla", "reason": None, "library": None, "shapes": {},
                "threads": 0}


def _threads_from_env() -> int:
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return 0
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{THREADS_ENV} must be a whole number of threads (0: the CPU affinity), "
                         f"got {raw!r}") from None
    if not 0 <= n <= 64:
        raise ValueError(f"{THREADS_ENV} must be 0..64, got {n}")
    return n


def set_threads(n: int) -> None:
    """Threads per kernel call from the next call on (no re-trace): n > 0 forced (even for small
    products), 0 = as many as this process's CPU affinity allows (the default)."""
    if not 0 <= n <= 64:
        raise ValueError(f"matmul threads must be 0..64, got {n}")
    _state["threads"] = n
    from . import build as _build
    lib = _build.loaded_lib()
    if lib is not None:
        lib.lg_set_threads(n)


def configure(mode: str, threads: Optional[int] = None) -> dict:
    """Set the mode for every later trace; ffi/auto build/load the library or fall back to xla
    (one log line saying why); threads: see set_threads (None: $SERVERS_JAX_MATMUL_THREADS or 0).
    Returns describe()."""
    if mode not in MODES:
        raise ValueError(f"matmul mode must be one of {', '.join(MODES)}, got {mode!r}")
    threads = _threads_from_env() if threads is None else threads
    with _lock:
        _state.update(requested=mode, mode=mode, reason=None, library=None, shapes={})
        if mode != "xla":
            if jax.default_backend() != "cpu":
                _state.update(mode="xla", reason=f"the FFI kernel is CPU-only (backend {jax.default_backend()})")
            else:
                from . import build as _build
                try:
                    _build.load()
                    _state["library"] = _build.loaded_path()
                except _build.BuildError as e:
                    _state.update(mode="xla", reason=str(e))
            if _state["reason"]:
                log.warning("matmul %s unavailable: %s; using XLA's dot", mode, _state["reason"])
    set_threads(threads)
    return describe()


def mode() -> str:
    return _state["mode"]


def describe() -> dict:
    """A copy: requested and effective mode, why they differ, the library, every decision."""
    with _lock:
        return {"requested": _state["requested"], "mode": _state["mode"], "reason": _state["reason"],
                "library": _state["library"], "max_m": MAX_M,
                "threads": {"forced": _state["threads"] or None, "affinity_cpus": _affinity()},
                "shapes": {k: dict(v) for k, v in _state["shapes"].items()}}


def _affinity() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _eligible(x, w) -> bool:
    return (x.ndim == 2 and w.ndim == 2 and x.dtype == jnp.float32 and w.dtype == jnp.float32
            and 1 <= x.shape[0] <= MAX_M and x.shape[1] >= 1)


def _use_ffi(layout: str, m: int, k: int, n: int) -> Optional[int]:
    """None: XLA's dot; else the kernel with this threads attribute (0: policy, 1: one thread)."""
    key = f"{layout} M={m} K={k} N={n}"
    with _lock:
        got = _state["shapes"].get(key)
        if got is not None:
            return got.get("threads", 0) if got["use"] == "ffi" else None
        current = _state["mode"]
    if current == "ffi":
        entry = {"use": "ffi"}
    else:                                   # auto: time both once, outside the lock (seconds)
        entry = time_both(layout, m, k, n)
    with _lock:
        got = _state["shapes"].setdefault(key, entry)
        return got.get("threads", 0) if got["use"] == "ffi" else None


def matmul(x, w):
    """x @ w (x [M, K], w [K, N])."""
    if _state["mode"] != "xla" and _eligible(x, w) and w.shape[0] == x.shape[1]:
        t = _use_ffi("nn", x.shape[0], x.shape[1], w.shape[1])
        if t is not None:
            return ffi_nn(x, w, t)
    return x @ w


def matmul_t(x, e):
    """x @ e.T (x [M, K], e [N, K]) without materialising the transpose."""
    if _state["mode"] != "xla" and _eligible(x, e) and e.shape[1] == x.shape[1]:
        t = _use_ffi("nt", x.shape[0], x.shape[1], e.shape[0])
        if t is not None:
            return ffi_nt(x, e, t)
    return x @ e.T


def library_loaded() -> Optional[str]:
    return _state["library"]
