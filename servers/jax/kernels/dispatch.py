"""Which matmul a call site gets: XLA's dot or the FFI kernel, decided at trace time.

    configure("xla" | "ffi" | "auto")   once, at server start, before any model function is traced
    matmul(x, w)    = x @ w      x [M, K], w [K, N]
    matmul_t(x, e)  = x @ e.T    x [M, K], e [N, K] (tied-embedding logits; e is not transposed)

A call takes the FFI kernel when the mode is ffi or auto, the library loaded, the backend is the
CPU, both operands are 2-D float32 and 1 <= M <= MAX_M (the kernel is single-threaded and meant for
decode's few rows; prefill's hundreds of rows stay on XLA's multi-threaded dot). In auto mode each
(layout, M, K, N) is also timed once (autotune.py) and the FFI kernel kept only where it was faster.
Every decision is recorded; describe() is what the server's /info shows under "matmul".
"""
from __future__ import annotations

import logging
import threading
from typing import Optional

import jax
import jax.numpy as jnp

log = logging.getLogger("servers.jax.kernels")

MODES = ("xla", "ffi", "auto")
MAX_M = 96          # decode rows (<= 32 slots) + a fused prefill piece (<= 64 rows)

_lock = threading.Lock()
_state: dict = {"requested": "xla", "mode": "xla", "reason": None, "library": None, "shapes": {}}


def configure(mode: str) -> dict:
    """Set the mode for every later trace; ffi/auto build/load the library or fall back to xla
    (one log line saying why). Returns describe()."""
    if mode not in MODES:
        raise ValueError(f"matmul mode must be one of {', '.join(MODES)}, got {mode!r}")
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
    return describe()


def mode() -> str:
    return _state["mode"]


def describe() -> dict:
    """A copy: requested and effective mode, why they differ, the library, every decision."""
    with _lock:
        return {"requested": _state["requested"], "mode": _state["mode"], "reason": _state["reason"],
                "library": _state["library"], "max_m": MAX_M, "threads": 1,
                "shapes": {k: dict(v) for k, v in _state["shapes"].items()}}


def _eligible(x, w) -> bool:
    return (x.ndim == 2 and w.ndim == 2 and x.dtype == jnp.float32 and w.dtype == jnp.float32
            and 1 <= x.shape[0] <= MAX_M and x.shape[1] >= 1)


def _use_ffi(layout: str, m: int, k: int, n: int) -> bool:
    key = f"{layout} M={m} K={k} N={n}"
    with _lock:
        got = _state["shapes"].get(key)
        if got is not None:
            return got["use"] == "ffi"
        current = _state["mode"]
    if current == "ffi":
        entry = {"use": "ffi"}
    else:                                   # auto: time both once, outside the lock (seconds)
        from .autotune import time_both
        entry = time_both(layout, m, k, n)
    with _lock:
        _state["shapes"].setdefault(key, entry)
        return _state["shapes"][key]["use"] == "ffi"


def ffi_nn(x, w):
    """The FFI kernel, unconditionally (x [M, K] f32, w [K, N] f32 -> [M, N])."""
    out = jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32)
    return jax.ffi.ffi_call("loadgen_matmul_nn", out, vmap_method="sequential")(x, w)


def ffi_nt(x, e):
    """The FFI kernel, unconditionally (x [M, K] f32, e [N, K] f32 -> x @ e.T [M, N])."""
    out = jax.ShapeDtypeStruct((x.shape[0], e.shape[0]), jnp.float32)
    return jax.ffi.ffi_call("loadgen_matmul_nt", out, vmap_method="sequential")(x, e)


def matmul(x, w):
    """x @ w (x [M, K], w [K, N])."""
    if (_state["mode"] != "xla" and _eligible(x, w) and w.shape[0] == x.shape[1]
            and _use_ffi("nn", x.shape[0], x.shape[1], w.shape[1])):
        return ffi_nn(x, w)
    return x @ w


def matmul_t(x, e):
    """x @ e.T (x [M, K], e [N, K]) without materialising the transpose."""
    if (_state["mode"] != "xla" and _eligible(x, e) and e.shape[1] == x.shape[1]
            and _use_ffi("nt", x.shape[0], x.shape[1], e.shape[0])):
        return ffi_nt(x, e)
    return x @ e.T


def library_loaded() -> Optional[str]:
    return _state["library"]
