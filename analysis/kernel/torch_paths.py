"""PyTorch paths of the common kernel: eager, torch.compile (default) and torch.compile (reduce-overhead).

    numpy fp32 X, W, b ─► host tensors in the dtype ─► device copies (resident)
        first call  : fresh function (dynamo reset before compiling) on resident inputs, synchronised
        device      : CUDA events around each call (CPU: perf_counter), median later
        transfer    : X host→device + call + Y device→host, every run (host clock)

fp32 runs with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False, cudnn too), as the seed did.
Shapes: X [M, K], W [K, N], b [N], Y [M, N].
"""
from __future__ import annotations

import platform
import time

import numpy as np

MODES = {"torch-compile": "default", "torch-compile-ro": "reduce-overhead"}


def _device(torch, want: str):
    if want == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def _kernel(torch, bias_relu: bool):
    if bias_relu:
        def f(x, w, b):  # Y [M, N] = ReLU(X [M, K] @ W [K, N] + b [N])
            return torch.relu(torch.addmm(b, x, w))
    else:
        def f(x, w, b):  # Y [M, N] = X [M, K] @ W [K, N]
            return x @ w
    return f


def run(torch, path: str, x: np.ndarray, w: np.ndarray, b: np.ndarray, dtype: str, proto,
        bias_relu: bool = True) -> dict:
    dev = _device(torch, proto.device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    td = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    # host tensors already in the dtype, so the timed copies move the dtype's bytes
    xh, wh, bh = (torch.from_numpy(a).to(td) for a in (x, w, b))
    xd, wd, bd = (t.to(dev, copy=True) for t in (xh, wh, bh))
    ws = [wd] + [wh.to(dev, copy=True) for _ in range(max(1, proto.rotate) - 1)]
    nw = len(ws)
    sync()

    fn = _kernel(torch, bias_relu)
    if path in MODES:
        torch._dynamo.reset()                      # no compiled graph carried over between rows
        fn = torch.compile(fn, mode=MODES[path])
    elif path != "torch-eager":
        raise ValueError(f"not a torch path: {path}")

    with torch.inference_mode():
        t0 = time.perf_counter()
        y = fn(xd, wd, bd)
        sync()
        first_s = time.perf_counter() - t0
        y_out = y.float().cpu().numpy().copy()     # before any later call can reuse the buffer

        for i in range(proto.warmup):
            fn(xd, ws[i % nw], bd)
        sync()

        device_s = []
        if cuda:
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(proto.repeats)]
            for i, (start, end) in enumerate(ev):
                w_i = ws[i % nw]
                start.record()
                fn(xd, w_i, bd)
                end.record()
                end.synchronize()
            device_s = [s.elapsed_time(e) / 1e3 for s, e in ev]
        else:
            for i in range(proto.repeats):
                w_i = ws[i % nw]
                t0 = time.perf_counter_ns()
                fn(xd, w_i, bd)
                device_s.append((time.perf_counter_ns() - t0) / 1e9)

        transfer_s = []
        for i in range(proto.transfer_runs):
            w_i = ws[i % nw]
            t0 = time.perf_counter_ns()
            xt = xh.to(dev, copy=True)                 # X host → device
            yt = fn(xt, w_i, bd).to("cpu", copy=True)   # Y device → host (synchronises)
            transfer_s.append((time.perf_counter_ns() - t0) / 1e9)

    name = torch.cuda.get_device_name(dev) if cuda else _cpu_name()
    versions = {"torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None),
                "python": platform.python_version()}
    return {"first_s": first_s, "device_s": device_s, "transfer_s": transfer_s, "y": y_out,
            "device": f"{dev.type}: {name}", "device_name": name, "kind": dev.type,
            "versions": versions,
            "timer": "cuda events per call" if cuda else "perf_counter per call (CPU, synchronous)"}


def _cpu_name() -> str:
    from analysis.roofline.calibrate import cpu_model
    return cpu_model()
