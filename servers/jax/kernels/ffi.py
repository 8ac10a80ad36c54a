"""The FFI matmul kernel's two calls, unconditionally: x @ w (ffi_nn) and x @ e.T (ffi_nt).

    x [M, K] f32, w [K, N] f32 ─► jax.ffi.ffi_call("loadgen_matmul_nn") ─► [M, N]
    x [M, K] f32, e [N, K] f32 ─► jax.ffi.ffi_call("loadgen_matmul_nt") ─► [M, N]

The targets are registered when build.py loads the library (dispatch.configure). dispatch.py (which
call takes the kernel) and autotune.py (which one is faster) both call these; neither imports the
other for them.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def ffi_nn(x, w, threads: int = 0):
    """The FFI kernel, unconditionally (x [M, K] f32, w [K, N] f32 -> [M, N]); threads: 0 = the
    process's policy (affinity or forced), 1 = this call site runs on one thread."""
    out = jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32)
    return jax.ffi.ffi_call("loadgen_matmul_nn", out, vmap_method="sequential")(x, w, threads=np.int32(threads))


def ffi_nt(x, e, threads: int = 0):
    """The FFI kernel, unconditionally (x [M, K] f32, e [N, K] f32 -> x @ e.T [M, N])."""
    out = jax.ShapeDtypeStruct((x.shape[0], e.shape[0]), jnp.float32)
    return jax.ffi.ffi_call("loadgen_matmul_nt", out, vmap_method="sequential")(x, e, threads=np.int32(threads))
