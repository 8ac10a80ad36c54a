"""Compile matmul.cc into a shared library, cached per user, and register its XLA FFI targets.

    matmul.cc + flags + compiler + jax version + this CPU ──sha256──► key
    $SERVERS_JAX_KERNEL_DIR (default ~/.cache/loadgen/kernels)/loadgen_matmul-<key>.so
        present: loaded as is;  absent: `$SERVERS_JAX_CXX (default g++) FLAGS matmul.cc` (~5 s),
        written to a temporary name and renamed, so concurrent builds never load half a file
    load() ─► ctypes.CDLL ─► jax.ffi.register_ffi_target("loadgen_matmul_nn" | "_nt", platform="cpu")

The key includes the CPU's model name and flags because of -march=native: a cache directory shared
between different hosts never hands one the other's instructions. Every failure (no compiler, no
FFI headers, a compile error, no AVX2/FMA) raises BuildError with a one-line reason; the caller
falls back to XLA's dot. No network is needed.

    python -m servers.jax.kernels.build [--force]     build now, print the library's path
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

SOURCE = Path(__file__).with_name("matmul.cc")
FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-w")
TARGETS = {"loadgen_matmul_nn": "LgMatmulNN", "loadgen_matmul_nt": "LgMatmulNT"}
BUILD_TIMEOUT_S = 300

_loaded: dict = {}          # one library and one registration per process


class BuildError(RuntimeError):
    """The kernel library cannot be built or loaded (the message is the one-line reason)."""


def compiler() -> str:
    return os.environ.get("SERVERS_JAX_CXX", "g++")


def cache_dir() -> Path:
    env = os.environ.get("SERVERS_JAX_KERNEL_DIR")
    return Path(env) if env else Path.home() / ".cache" / "loadgen" / "kernels"


def _cpu_signature() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        import platform
        return platform.processor() or platform.machine()
    keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return "\n".join(keep[:2])


def _has_avx2_fma() -> Optional[bool]:
    """True/False from /proc/cpuinfo, None where it cannot be read (the compiler decides then)."""
    sig = _cpu_signature()
    if "flags" not in sig:
        return None
    flags = sig.split("flags", 1)[1].split()
    return "avx2" in flags and "fma" in flags


def library_path() -> Path:
    import jax

    h = hashlib.sha256()
    for part in (SOURCE.read_bytes(), " ".join(FLAGS).encode(), compiler().encode(),
                 jax.__version__.encode(), _cpu_signature().encode()):
        h.update(part)
        h.update(b"\0")
    return cache_dir() / f"loadgen_matmul-{h.hexdigest()[:16]}.so"


def build(force: bool = False) -> Path:
    """The library's path, compiling it first when it is not cached (or when force)."""
    import jax

    if _has_avx2_fma() is False:
        raise BuildError("this CPU has no AVX2/FMA")
    out = library_path()
    if out.exists() and not force:
        return out
    cxx = compiler()
    if shutil.which(cxx) is None:
        raise BuildError(f"compiler {cxx!r} not found (set SERVERS_JAX_CXX)")
    include = Path(jax.ffi.include_dir())
    if not (include / "xla" / "ffi" / "api" / "ffi.h").exists():
        raise BuildError(f"XLA FFI headers not found under {include}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BuildError(f"cannot create {out.parent}: {e.strerror}") from None
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".tmp", dir=out.parent)
    os.close(fd)
    cmd = [cxx, *FLAGS, f"-I{include}", str(SOURCE), "-o", tmp]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if proc.returncode != 0:
            err = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:200])
            raise BuildError(f"{cxx} failed (exit {proc.returncode}): {err.strip()}")
        os.replace(tmp, out)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{cxx} took over {BUILD_TIMEOUT_S} s") from None
    except OSError as e:
        raise BuildError(f"cannot run {cxx}: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def load() -> ctypes.CDLL:
    """Build if needed, load, and register the FFI targets (once per process)."""
    if "lib" in _loaded:
        return _loaded["lib"]
    import jax

    path = build()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise BuildError(f"cannot load {path}: {e}") from None
    for target, symbol in TARGETS.items():
        jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
    lib.lg_set_threads.argtypes, lib.lg_set_threads.restype = [ctypes.c_int], None
    lib.lg_threads_for.argtypes, lib.lg_threads_for.restype = [ctypes.c_int64] * 4, ctypes.c_int
    _loaded["lib"], _loaded["path"] = lib, path
    return lib


def loaded_lib() -> Optional[ctypes.CDLL]:
    return _loaded.get("lib")


def loaded_path() -> Optional[str]:
    return str(_loaded["path"]) if "path" in _loaded else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m servers.jax.kernels.build",
                                 description="build the FFI matmul kernels into the per-user cache")
    ap.add_argument("--force", action="store_true", help="rebuild even if the cached library exists")
    opt = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        path = build(force=opt.force)
    except BuildError as e:
        sys.stderr.write(f"servers.jax.kernels.build: error: {e}\n")
        return 2
    print(f"{path} ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
