"""The `vllm serve` command line, both ways.

    spec (loadgen's ServerSpec, kind vllm; duck-typed) + port + Launcher.prefix
     ─► build_vllm_argv(): PREFIX serve MODEL --host 127.0.0.1 --port P, the spec's fields as flags
                           (slots ─► --max-num-seqs, ...), then extra_args(spec.args)
    argv ─► parse_flags(): the ``--flag value`` pairs as a dict (what sut.json records)
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional

from servers.vllm.launcher import LaunchError, launcher


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
    if prefix is None:
        prefix = launcher(getattr(spec, "executable", None),
                          {**os.environ, **(getattr(spec, "env", None) or {})})
    argv = [*prefix, "serve", spec.model,
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
