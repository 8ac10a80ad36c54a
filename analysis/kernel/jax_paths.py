"""JAX paths of the common kernel: eager (op-by-op dispatch) and jax.jit (one XLA computation).

    numpy fp32 X, W, b ─► host arrays in the dtype ─► jax.device_put (resident)
        first call  : a fresh Python function (so no jit cache is reused), block_until_ready
        device      : host clock around call + block_until_ready, median later
        transfer    : device_put(X) + call + np.array(Y) (a copy back to the host), every run

Precision as in the seed: fp32 with Precision.HIGHEST, bf16 with Precision.DEFAULT.
On a CPU backend the "transfer" is a host-memory copy (device_put may even alias), not a bus crossing.
Shapes: X [M, K], W [K, N], b [N], Y [M, N].
"""
from __future__ import annotations

import platform
import time

import numpy as np


def _make(jax, path: str, dtype: str, bias_relu: bool):
    jnp = jax.numpy
    prec = jax.lax.Precision.HIGHEST if dtype == "fp32" else jax.lax.Precision.DEFAULT
    if bias_relu:
        def f(x, w, b):  # Y [M, N] = ReLU(X [M, K] @ W [K, N] + b [N])
            return jax.nn.relu(jnp.dot(x, w, precision=prec) + b)
    else:
        def f(x, w, b):  # Y [M, N] = X [M, K] @ W [K, N]
            return jnp.dot(x, w, precision=prec)
    if path == "jax-jit":
        return jax.jit(f)
    if path == "jax-eager":
        return f
    raise ValueError(f"not a jax path: {path}")


def run(jax, path: str, x: np.ndarray, w: np.ndarray, b: np.ndarray, dtype: str, proto,
        bias_relu: bool = True) -> dict:
    jnp = jax.numpy
    dev = jax.devices("cpu")[0] if proto.device == "cpu" else jax.devices()[0]
    npd = {"fp32": np.float32, "bf16": jnp.bfloat16}[dtype]
    xh, wh, bh = (np.asarray(a).astype(npd) for a in (x, w, b))
    xd, wd, bd = (jax.device_put(a, dev) for a in (xh, wh, bh))
    ws = [wd] + [jax.device_put(wh.copy(), dev) for _ in range(max(1, proto.rotate) - 1)]
    for a in (xd, bd, *ws):
        a.block_until_ready()
    nw = len(ws)

    fn = _make(jax, path, dtype, bias_relu)
    t0 = time.perf_counter()
    y = fn(xd, wd, bd).block_until_ready()
    first_s = time.perf_counter() - t0
    y_out = np.array(y, dtype=np.float32)

    for i in range(proto.warmup):
        fn(xd, ws[i % nw], bd).block_until_ready()
    device_s = []
    for i in range(proto.repeats):
        w_i = ws[i % nw]
        t0 = time.perf_counter_ns()
        fn(xd, w_i, bd).block_until_ready()
        device_s.append((time.perf_counter_ns() - t0) / 1e9)

    transfer_s = []
    for i in range(proto.transfer_runs):
        w_i = ws[i % nw]
        t0 = time.perf_counter_ns()
        xt = jax.device_put(xh, dev)                 # X host → device
        yh = np.array(fn(xt, w_i, bd))                # Y device → host (copy; waits for the result)
        transfer_s.append((time.perf_counter_ns() - t0) / 1e9)

    kind = dev.platform
    name = dev.device_kind
    if kind == "cpu":
        from analysis.roofline.calibrate import cpu_model
        name = cpu_model()
    elif kind == "gpu":
        kind = "cuda" if "nvidia" in name.lower() else "gpu"
    import jaxlib
    versions = {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", None),
                "backend": jax.default_backend(), "python": platform.python_version()}
    return {"first_s": first_s, "device_s": device_s, "transfer_s": transfer_s, "y": y_out,
            "device": f"{kind}: {name}", "device_name": name, "kind": kind, "versions": versions,
            "timer": "host clock around call + block_until_ready"}
