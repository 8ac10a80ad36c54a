"""analysis.kernel: the seed's common kernel Y = ReLU(XW + b) across frameworks and time boundaries.

    KernelCase(M, K, N, dtype) ─► kernel.py (harness: warm-up, timed repeats, error vs float64,
                                             three time boundaries: device, host, end to end)
        ─► jax_paths.py (jax eager / jit)   torch_paths.py (torch eager / compile, CPU or CUDA)
    decode.py: one decode step as GEMVs (model_cost) timed and set beside a measured TPOT

May import: numpy, analysis.roofline; torch and jax lazily (a missing one is 'unavailable').
"""
