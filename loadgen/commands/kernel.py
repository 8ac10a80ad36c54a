"""`loadgen kernel`: the common kernel Y = ReLU(XW + b) across frameworks, or one decode step's GEMVs.

    flags ─► analysis.kernel.harness.run_matrix (paths × dtypes × M) ─► rich table / --csv / --json
          └► --model PRESET ─► analysis.roofline.model_cost.decode_gemv_list ─► jax-jit timings per shape
               ─► sum vs bandwidth bound vs the engine's measured TPOT (--run / --measured-step-ms)

Roofline specs: the `loadgen calibrate` file for the local CPU (or the GPU it measured), else the
catalogue entry matching the device name (analysis.roofline.devices). Runnable as
`python -m loadgen.commands.kernel` too (no other part of the CLI needed).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections import OrderedDict
from pathlib import Path

from analysis.roofline import devices
from analysis.kernel import harness
from analysis.roofline import model_cost
from analysis.roofline.calibrate import DEFAULT_PATH
from loadgen.commands import standalone, subcommand

COLUMNS = [("path", "path"), ("dtype", "dtype"), ("M", "M"), ("I FLOP/B", "intensity"),
           ("first ms", "first_ms"), ("device ms", "device_ms"), ("w/ transfer ms", "transfer_ms"),
           ("TFLOP/s", "tflops"), ("GB/s", "gbps"), ("max abs err", "max_abs_err"),
           ("bound ms", "bound_ms"), ("roof", "binding"), ("of bound", "bound_fraction")]


def _csv_list(kind):
    def parse(s: str):
        try:
            return [kind(v) for v in s.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a comma-separated list of {kind.__name__}: {s!r}")
    return parse


def register(subparsers) -> None:
    add_arguments(subcommand(subparsers, "kernel", main))


def add_arguments(p) -> None:
    p.add_argument("--paths", type=_csv_list(str), default=list(harness.PATHS),
                   help=f"framework paths to time, a comma list from {','.join(harness.PATHS)} "
                        "(default: all; a framework not installed gives an \"unavailable\" row)")
    p.add_argument("--dtypes", type=_csv_list(str), default=["fp32", "bf16"],
                   help="precisions, a comma list of fp32, bf16 (default fp32,bf16)")
    p.add_argument("-M", "--m", dest="ms", type=_csv_list(int), default=[128, 1],
                   help="rows of X (the batch), a comma list (default 128,1)")
    p.add_argument("-K", "--k", dest="k", type=int, default=1024,
                   help="columns of X = rows of W (default 1024)")
    p.add_argument("-N", "--n", dest="n", type=int, default=1024,
                   help="columns of W and Y (default 1024)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up calls (50; 5 with --model)")
    p.add_argument("--repeats", type=int, default=None, help="timed calls (500; 50 with --model)")
    p.add_argument("--transfer-repeats", type=int, default=None, help="timed calls with the host-device transfers (default: --repeats)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--device", choices=["auto", "cpu"], default="auto",
                   help="auto: each framework's default device (a GPU when present); cpu: the "
                        "CPU only (default auto)")
    p.add_argument("--calibration", type=Path, default=None,
                   help=f"spec JSON from `loadgen calibrate` (default {DEFAULT_PATH} if present)")
    p.add_argument("--spec", default=None, help=f"catalogue device for every row's roofline: "
                                                f"{', '.join(devices.CATALOGUE)}")
    p.add_argument("--csv", type=Path, default=None, metavar="PATH",
                   help="also write the rows as CSV to PATH")
    p.add_argument("--json", type=Path, default=None, metavar="PATH",
                   help="also write the rows and the protocol as JSON to PATH")
    p.add_argument("--compare-seed", action="store_true",
                   help="also print the seed's A100 and TPU v5e rows (measured by its authors)")
    p.add_argument("--model", default=None, help="preset name or shape JSON: time one decode step's GEMVs")
    p.add_argument("--batch", type=int, default=1,
                   help="with --model: sequences per decode step, the GEMVs' M (default 1)")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="with --model: the GEMVs' precision (default fp32)")
    p.add_argument("--context-len", type=int, default=None, help="with --model: positions attended")
    p.add_argument("--run", type=Path, default=None, help="with --model: run dir with the measured TPOT")
    p.add_argument("--measured-step-ms", type=float, default=None,
                   help="with --model: the engine's measured step (TPOT) in ms, instead of --run")


def _fail(msg: str) -> int:
    print(f"loadgen kernel: error: {msg}", file=sys.stderr)
    return 2


def _spec_picker(args):
    if args.spec:
        spec = devices.get(args.spec)
        return lambda kind, name: spec, spec.name
    cal_path = args.calibration or DEFAULT_PATH.expanduser()
    cal = devices.load_spec(cal_path) if Path(cal_path).exists() else None
    note = f"calibration {cal_path}" if cal else "no calibration file (run `loadgen calibrate`)"
    return (lambda kind, name: harness.choose_spec(kind, name, cal)), note


def _fmt(v, key=""):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "pass" if v else "FAIL"
    if key == "max_abs_err":
        return f"{v:.2e}"
    if key == "bound_fraction":
        return f"{100 * v:.1f}%"
    if key == "gbps":
        return f"{v:.1f}"
    if key in ("tflops",):
        return f"{v:.3f}"
    if key in ("device_ms", "transfer_ms", "bound_ms"):
        return f"{v:.4f}"
    if isinstance(v, float):
        return f"{v:.3f}" if key != "intensity" else f"{v:.2f}"
    return str(v)


def _console():
    from rich.console import Console
    c = Console()
    return c if c.is_terminal else Console(width=200)


def print_rows(rows, title: str, console=None) -> None:
    from rich.table import Table
    console = console or _console()
    t = Table(title=title, title_justify="left")
    for head, _ in COLUMNS:
        t.add_column(head, justify="right" if head not in ("path", "dtype", "roof") else "left")
    t.add_column("check")
    for r in rows:
        if r.status != "ok":
            t.add_row(r.path, r.dtype, str(r.M), _fmt(r.intensity, "intensity"),
                      f"[yellow]{r.status}[/]: {r.reason}", *[""] * (len(COLUMNS) - 4))
            continue
        cells = [r.path if k == "path" else _fmt(getattr(r, k), k)
                 for _, k in COLUMNS]
        err = _fmt(r.passed) if r.tolerance is not None or r.passed is not None else "—"
        t.add_row(*cells, "; ".join([err, *row_flags(r)]))
    console.print(t)


def row_flags(r) -> list[str]:
    """What makes a row's figures suspect, said in the row (not only in a footnote)."""
    out = []
    if r.transfer_ms is not None and r.device_ms is not None and r.transfer_ms < r.device_ms:
        out.append("w/ transfer < device: device time inflated (noisy host?), rerun")
    if r.bound_fraction is not None and r.bound_fraction > 2.0:
        out.append("of bound > 200%: " + ("cache-resident, not a memory figure"
                                          if (r.binding or "").startswith("memory")
                                          else "the spec's rate is below this machine's"))
    return out


def _header(rows, spec_note: str) -> str:
    seen = OrderedDict()
    for r in rows:
        if r.status == "ok":
            seen.setdefault(r.framework, (r.device, r.versions))
    parts = [f"{fw}: {dev} ({', '.join(f'{k} {v}' for k, v in ver.items() if v)})"
             for fw, (dev, ver) in seen.items()]
    return " | ".join(parts) + f" | roofline: {spec_note}"


def write_outputs(rows, args, extra: dict) -> None:
    dicts = [r.as_dict() for r in rows]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**extra, "rows": dicts}, indent=2) + "\n")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        keys = [k for k in dicts[0] if k not in ("runs", "versions")] if dicts else []
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(dicts)


def _protocol(args, model: bool) -> harness.Protocol:
    warm = args.warmup if args.warmup is not None else (5 if model else 50)
    rep = args.repeats if args.repeats is not None else (50 if model else 500)
    xfer = args.transfer_repeats if args.transfer_repeats is not None else (0 if model else None)
    return harness.Protocol(warm, rep, xfer, args.seed, args.device)


def main(args) -> int:
    # the kernel needs a few MiB: keep JAX from taking 75% of a GPU that torch shares
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    bad = [p for p in args.paths if p not in harness.PATHS]
    if bad:
        return _fail(f"--paths: unknown {bad[0]!r} (known: {', '.join(harness.PATHS)})")
    if any(d not in harness.ELEM_BYTES for d in args.dtypes):
        return _fail("--dtypes: choose from fp32, bf16")
    for flag, vals in (("-M", args.ms), ("-K", [args.k]), ("-N", [args.n]), ("--batch", [args.batch])):
        if not vals or min(vals) < 1:
            return _fail(f"{flag} must be positive integers")
    if any(v is not None and v < 0 for v in (args.warmup, args.transfer_repeats)) or \
            (args.repeats is not None and args.repeats < 1):
        return _fail("--warmup/--transfer-repeats must be >= 0 and --repeats >= 1")
    if args.spec and args.spec not in devices.CATALOGUE:
        return _fail(f"--spec: unknown {args.spec!r} (known: {', '.join(devices.CATALOGUE)})")
    if args.calibration and not args.calibration.exists():
        return _fail(f"--calibration: no such file {args.calibration}")
    try:
        spec_for, spec_note = _spec_picker(args)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return _fail(f"--calibration: unreadable spec ({e})")
    if args.model:
        return run_model(args, _protocol(args, True), spec_for, spec_note)
    proto = _protocol(args, False)
    console = _console()
    console.print(f"[dim]Y = ReLU(XW + b), K={args.k}, N={args.n}; warm-up {proto.warmup}, "
                  f"median of {proto.repeats}; note: a shared machine makes timings noisy[/]")
    rows = harness.run_matrix(args.paths, args.dtypes, args.ms, args.k, args.n, proto,
                             spec_for=spec_for,
                             progress=lambda r: console.print(f"[dim]  {r.path} {r.dtype} M={r.M}: "
                                                              f"{r.status}[/]"))
    head = _header(rows, spec_note)
    print_rows(rows, f"loadgen kernel (measured) — {head}", console)
    over = [r for r in rows if r.bound_fraction and r.bound_fraction > 1.0]
    for roof, why in (("memory", "the inputs stay in on-chip caches between runs, so main memory "
                                 "never sees Q_min per call"),
                      ("compute", "the row beat the spec's matmul rate (a calibrated rate is itself "
                                  "a measurement, and a shared machine's varies)")):
        n = sum(1 for r in over if (r.binding or "").startswith(roof))
        if n:
            console.print(f"[dim]'of bound' above 100% in {n} {roof}-bound row(s): {why}[/]")
    if args.compare_seed:
        for dev in ("a100", "tpu-v5e"):
            print_rows(harness.seed_rows(dev), f"seed's measurements, 2026-10-19 — {harness.SEED_DEVICES[dev]} "
                       f"(evidence: measured by the seed's authors; xpu-comparison-course-week5 §11.3)",
                       console)
    write_outputs(rows, args, {"header": head, "protocol": vars(proto),
                               "seed": {d: [r.as_dict() for r in harness.seed_rows(d)]
                                        for d in harness.SEED_ROWS} if args.compare_seed else None})
    failed = [r for r in rows if r.status == "ok" and not r.passed]
    return 1 if failed else 0


def load_shape(model: str, dtype: str) -> dict:
    """A preset of servers.jax.presets, or a JSON file holding a shape dict (or /info with "model")."""
    p = Path(model)
    if p.suffix == ".json" or p.exists():
        d = json.loads(p.read_text(encoding="utf-8"))
        return dict(d.get("model", d))
    from servers.jax import presets
    args = presets.get_preset(model)
    return presets.shape_dict(args, dtype, args.max_position, 1)


def run_model(args, proto, spec_for, spec_note: str) -> int:
    from analysis.kernel import decode as kernel_decode
    try:
        shape = load_shape(args.model, args.dtype)
        model_cost.decode_gemv_list(shape, args.batch)
    except (ValueError, OSError, KeyError, TypeError) as e:
        return _fail(f"--model: {e}")
    measured, source = args.measured_step_ms, "--measured-step-ms" if args.measured_step_ms else ""
    if args.run is not None:
        if not args.run.is_dir():
            return _fail(f"--run: not a directory: {args.run}")
        measured, source = kernel_decode.measured_tpot_ms(args.run)
    study = kernel_decode.decode_study(shape, args.batch, args.dtype, proto, spec_for,
                                       args.context_len, measured, source)
    from rich.table import Table
    con = _console()
    t = Table(title=f"decode step GEMVs of {study['model']} (batch {args.batch}, {args.dtype}, "
                    f"jax-jit, median of {proto.repeats}) — roofline: {spec_note}", title_justify="left")
    for h in ("projection", "×", "M", "K", "N", "MB", "bound ms", "device ms", "of bound", "check"):
        t.add_column(h, justify="left" if h == "projection" else "right")
    for g in study["gemvs"]:
        status = _fmt(g["passed"]) if g["status"] == "ok" else f"{g['status']}: {g['reason']}"
        t.add_row("/".join(g["names"]), str(g["count"]), str(g["M"]), str(g["K"]), str(g["N"]),
                  f"{g['bytes'] / 1e6:.2f}", _fmt(g["bound_ms"], "bound_ms"),
                  _fmt(g["device_ms"], "device_ms"), _fmt(g["bound_fraction"], "bound_fraction"), status)
    con.print(t)
    ms = lambda v: "—" if v is None else f"{v:.3f} ms"  # noqa: E731
    con.print(f"GEMV bytes per step {study['gemv_bytes_per_step'] / 1e6:.1f} MB; whole step "
              f"(weights + KV at context {study['context_len']}) {study['decode_step_bytes'] / 1e6:.1f} MB")
    con.print(f"predicted Σ GEMV (roofline max(F/P, Q/BW) per shape, calculated): "
              f"{ms(study['predicted_gemv_ms'])}; whole step at Q/BW alone: "
              f"{ms(study['predicted_step_memory_ms'])}")
    con.print(f"measured Σ GEMV (kernel harness):     {ms(study['measured_gemv_ms'])}")
    if measured is not None:
        con.print(f"engine's measured step (TPOT median, {source}): {ms(measured)}; gap "
                  f"{ms(study.get('gap_ms'))} = {study.get('gap_note')}")
    elif args.run is not None:
        con.print(f"engine's measured step: unmeasured ({source})")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(study["gemvs"][0]), extrasaction="ignore")
            w.writeheader()
            w.writerows(study["gemvs"])
        args.csv = None
    write_outputs([], args, {"decode_study": study})
    return 0


if __name__ == "__main__":
    standalone("kernel", main, add_arguments)
