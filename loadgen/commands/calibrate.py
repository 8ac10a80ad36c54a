"""`loadgen calibrate`: measure this machine's memory bandwidth and matmul rate, save them as a spec.

    flags ─► analysis.roofline.calibrate.calibrate() (read + copy + matmul, medians; the read is
          the memory bandwidth, the copy kept beside it) ─► DeviceSpec (evidence: measured)
          (the host's load around it: a busy host is measured once more, else labelled
           "measured (busy host: load 1.9, spread 22 %)")
          ─► calib_cache.save (locked, versioned, atomic) ─► ~/.cache/loadgen/calibration.json (or --out) ─► `loadgen kernel` roofline,
             and the device spec later runs of a managed server on this host freeze (device.json)

Runnable as `python -m loadgen.commands.calibrate` too.
"""
from __future__ import annotations

import sys
from pathlib import Path

from analysis.roofline import calibrate as cal
from loadgen.commands import standalone, subcommand


def register(subparsers) -> None:
    add_arguments(subcommand(subparsers, "calibrate", main))


def add_arguments(p) -> None:
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | jax (JAX's default device)")
    p.add_argument("--out", type=Path, default=cal.DEFAULT_PATH, help=f"where the spec is saved (default {cal.DEFAULT_PATH})")
    p.add_argument("--copy-mib", type=int, default=None,
                   help="read and copy buffer size in MiB (default 256 on CPU, 2048 on a GPU)")
    p.add_argument("--matmul-n", type=int, default=None, help="matmul size n: an n x n product, 2n^3 FLOPs (default 2048 on CPU, "
                        "8192 on a GPU)")
    p.add_argument("--repeats", type=int, default=10,
                   help="timed runs per figure after one warm-up; the median is kept (default 10)")
    p.add_argument("--dtypes", default="fp32,bf16",
                   help="matmul precisions, a comma list of fp32, bf16 (default fp32,bf16)")


def main(args) -> int:
    if args.device not in ("auto", "cpu", "cuda", "jax"):
        return _fail(f"--device must be auto, cpu, cuda or jax, not {args.device!r}")
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    if not dtypes or any(d not in ("fp32", "bf16") for d in dtypes):
        return _fail("--dtypes: comma list of fp32, bf16")
    for flag, v in (("--copy-mib", args.copy_mib), ("--matmul-n", args.matmul_n),
                    ("--repeats", args.repeats)):
        if v is not None and v < 1:
            return _fail(f"{flag} must be a positive integer")
    if args.device == "cuda" and not cal._has_cuda():
        return _fail("--device cuda: torch sees no CUDA device")
    try:
        spec = cal.calibrate(args.device, args.copy_mib * 2**20 if args.copy_mib else None,
                             args.matmul_n, args.repeats, dtypes,
                             log=lambda s: print(f"  {s}", file=sys.stderr))
    except ImportError as e:               # torch or jax missing; a module of ours: a bug
        if (e.name or "").split(".")[0] in ("loadgen", "analysis", "servers"):
            raise
        return _fail(f"--device {args.device}: {e}")
    from analysis.roofline import calib_cache      # locked, versioned, atomic (shared cache)
    path = calib_cache.save(spec, args.out.expanduser())
    from rich.console import Console
    from rich.table import Table
    t = Table(title=f"{spec.name} — {spec.meta['evidence']}, {spec.meta['date']} on "
                    f"{spec.meta['host']}",
              title_justify="left")
    for h in ("figure", "value", "evidence", "method"):
        t.add_column(h)
    bw = spec.mem_bandwidth
    t.add_row("memory bandwidth (read)", f"{bw.value / 1e9:.1f} GB/s", bw.evidence,
              bw.conditions)
    cp = spec.other.get("copy_bandwidth")
    if cp is not None:
        t.add_row("copy bandwidth (not the roof)", f"{cp.value / 1e9:.1f} GB/s", cp.evidence,
                  cp.conditions)
    for dt, f in spec.peak.items():
        val = f"{f.value / 1e12:.3f} TFLOP/s" if f.value else f"— ({f.reason})"
        t.add_row(f"matmul {dt}", val, f.evidence, f.conditions)
    con = Console()
    (con if con.is_terminal else Console(width=160)).print(t)
    load = spec.meta.get("host_load") or {}
    if load.get("busy"):
        print(f"warning: {spec.meta['evidence']}: {'; '.join(load.get('reasons') or [])} "
              "(kept the better of two tries; calibrate again on a quiet host)", file=sys.stderr)
    print(f"saved {path}")
    return 0


def _fail(msg: str) -> int:
    print(f"loadgen calibrate: error: {msg}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    standalone("calibrate", main, add_arguments)
