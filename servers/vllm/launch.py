"""vLLM as a managed server: the `vllm serve` command line and what sut.json says about it.

    spec (loadgen's ServerSpec, kind vllm; duck-typed: nothing of loadgen is imported)
     ─► launcher(): `vllm` on PATH, else `python -m vllm.entrypoints.cli.main`
                              (the console script's module), else LaunchError with the install hint
                         ─► build_vllm_argv(): serve MODEL --host 127.0.0.1 --port P + the spec's flags
    after /health is 200 ─► describe_server(): version (GET /version, the package metadata of
                              loadgen's interpreter, else `vllm --version`), the flags as a dict,
                              GPUs and driver (nvidia-smi, else NVML), CUDA_VISIBLE_DEVICES
                              ─► ManagedServer.describe()["sut"] ─► sut.json

Every probe is bounded by a timeout and, where it cannot answer, says so:
``{"status": "unavailable", "reason": "..."}`` — never a guessed value.
"""
from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any, Optional


class LaunchError(ValueError):
    """The server cannot be launched as specified; ``str()`` is one line naming the field."""


INSTALL_HINT = ("install it (pip install vllm, on a machine with a supported GPU; "
                "https://docs.vllm.ai/en/latest/getting_started/installation/) or start it "
                "yourself and use target.url")
CLI_MODULE = "vllm.entrypoints.cli.main"   # what the `vllm` console script runs
GPU_QUERY = "index,name,driver_version,memory.total,uuid"
SECRET_WORDS = ("key", "token", "secret", "password")    # flags whose values are never stored


def unavailable(reason: str) -> dict:
    return {"status": "unavailable", "reason": reason}


def launcher() -> list[str]:
    """The argv prefix that runs the vllm CLI here; LaunchError (one line) when there is none."""
    exe = shutil.which("vllm")
    if exe is not None:
        return [exe]
    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return [sys.executable, "-m", CLI_MODULE]
    raise LaunchError("target.server.kind: vllm is not on PATH and not importable by "
                        f"{sys.executable}; {INSTALL_HINT}")


def _flag(key: str) -> str:
    return key if key.startswith("-") else "--" + key.replace("_", "-")


def extra_args(args: dict) -> list[str]:
    """``{"enable_prefix_caching": True, "max_num_batched_tokens": 8192}`` ─► CLI flags.
    True: the bare flag; False/None: left out; a list: the flag then each item."""
    out: list[str] = []
    for k, v in args.items():
        if v is None or v is False:
            continue
        if v is True:
            out.append(_flag(k))
        elif isinstance(v, (list, tuple)):
            out += [_flag(k), *map(str, v)]
        elif isinstance(v, dict):
            out += [_flag(k), json.dumps(v, separators=(",", ":"))]
        else:
            out += [_flag(k), str(v)]
    return out


def build_vllm_argv(spec: Any, port: int, prefix: Optional[list[str]] = None) -> list[str]:
    """``vllm serve MODEL`` on 127.0.0.1:``port`` with the spec's settings, then ``spec.args``.

    slots ─► --max-num-seqs; load_format "dummy" gives random weights (weight-free runs)."""
    if not spec.model:
        raise LaunchError("target.server.model: kind vllm needs a model path or name")
    argv = [*(prefix if prefix is not None else launcher()), "serve", spec.model,
            "--host", "127.0.0.1", "--port", str(port)]
    for flag, val in (("--dtype", spec.dtype), ("--max-num-seqs", spec.slots),
                      ("--max-model-len", spec.max_model_len),
                      ("--tensor-parallel-size", spec.tensor_parallel_size),
                      ("--gpu-memory-utilization", spec.gpu_memory_utilization),
                      ("--load-format", spec.load_format)):
        if val is not None:
            argv += [flag, str(val)]
    return argv + extra_args(spec.args)


def parse_flags(argv: list[str]) -> dict[str, Any]:
    """The ``--flag value`` pairs of a command line as a dict (bare flags ─► True)."""
    flags: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            key, _, inline = a[2:].partition("=")
            vals = []
            j = i + 1
            while not inline and j < len(argv) and not argv[j].startswith("--"):
                vals.append(argv[j])
                j += 1
            flags[key] = inline or (vals[0] if len(vals) == 1 else (vals or True))
            i = j if not inline else i + 1
        else:
            i += 1
    return flags


def _run(argv: list[str], timeout_s: float) -> tuple[Optional[str], Optional[str]]:
    """(stdout, None) or (None, reason)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return None, f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv[:3])} did not answer within {timeout_s:g} s"
    except OSError as e:
        return None, f"{argv[0]}: {e}"
    if p.returncode != 0:
        last = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"{' '.join(argv[:3])} exited with {p.returncode}: {last[0][:200]}"
    return p.stdout, None


def http_json(url: str, timeout_s: float = 5.0) -> tuple[Optional[Any], Optional[str]]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return json.loads(r.read()), None
    except urllib.error.HTTPError as e:
        return None, f"GET {url}: HTTP {e.code}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        return None, f"GET {url}: {type(e).__name__}: {e}"


def vllm_version(prefix: Optional[list[str]], base_url: Optional[str],
                 timeout_s: float = 120.0) -> dict:
    """The vLLM version, each way an answer or its reason: the running server's ``GET /version``,
    the installed package's metadata, and — only when neither answered, since it imports vLLM
    (seconds) — ``vllm --version`` of the launcher that was started."""
    out: dict[str, Any] = {}
    if base_url is None:
        out["server"] = unavailable("no server URL")
    else:
        body, why = http_json(base_url.rstrip("/") + "/version")
        ver = body.get("version") if isinstance(body, dict) else None
        out["server"] = ver or unavailable(why or f"GET /version answered {body!r:.80}")
    out["package_python"] = sys.executable     # a `vllm` on PATH may live in another env
    try:
        out["package"] = md.version("vllm")
    except md.PackageNotFoundError:
        out["package"] = unavailable(f"no vllm distribution in {sys.executable}'s environment")
    if isinstance(out["server"], str) or isinstance(out["package"], str):
        out["cli"] = unavailable("not run: the server or the package metadata answered")
    elif prefix is None:
        out["cli"] = unavailable("no vllm launcher")
    else:
        text, why = _run([*prefix, "--version"], timeout_s)
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


def describe_server(spec: Any, argv: list[str], base_url: Optional[str]) -> dict:
    """What sut.json records about a managed server: flags, GPUs, and for vLLM its version."""
    flags = {k: ("<redacted>" if any(w in k.lower() for w in SECRET_WORDS) else v)
             for k, v in parse_flags(argv).items()}
    out: dict[str, Any] = {"kind": spec.kind, "flags": flags,
                           "cuda_visible_devices": {**os.environ, **spec.env}.get(
                               "CUDA_VISIBLE_DEVICES"),
                           "gpus": gpu_inventory()}
    if spec.kind == "vllm":
        try:
            serve = argv.index("serve")
        except ValueError:
            serve = len(argv)
        out["launcher"] = argv[:serve]
        out["model"] = spec.model
        out["version"] = vllm_version(argv[:serve] or None, base_url)
    return out
