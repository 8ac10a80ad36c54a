"""servers.jax.kernels: a hand-written CPU matmul for the engine's small-M products (XLA FFI).

Data flow::

    serve.py --matmul xla|ffi|auto ──► configure(mode)            (once, before any trace)
                                          │ ffi/auto: build.load()
                                          ▼
        matmul.cc ──g++ -O3 -march=native──► ~/.cache/loadgen/kernels/loadgen_matmul-<hash>.so
                                          │ ctypes + jax.ffi.register_ffi_target(platform="cpu")
                                          ▼ (no compiler / headers / AVX2: one log line, mode xla)
    model.py  h @ W      ──► matmul(h, W)      ─┐ dispatch.py, at trace time, per call site:
              h @ E.T    ──► matmul_t(h, E)    ─┤  xla: x @ w    ffi: jax.ffi.ffi_call(...)
                                                ┘  auto: autotune.py times both once per shape
                                          │
                                          ▼
                                   describe() ──► /info "matmul" (mode, reason, per-shape choices)

The kernel (matmul.cc) is fp32, AVX2/FMA: W [K, N] read as KU-row sequential runs against a y
block held in L1 (row streaming), and E [N, K] as dot products along its rows. Each call splits
y's columns (at M = 1 W's rows) over XLA's own intra-op threads, as many as the process's CPU
affinity allows (pinned to one core: one), or $SERVERS_JAX_MATMUL_THREADS when set.
Imports: jax, numpy and the standard library only (never loadgen/ or analysis/).
"""
# build.py is imported lazily (by configure), so `python -m servers.jax.kernels.build` runs it fresh
from .dispatch import MAX_M, MODES, configure, describe, matmul, matmul_t, mode

__all__ = ["MAX_M", "MODES", "configure", "describe", "matmul", "matmul_t", "mode"]
