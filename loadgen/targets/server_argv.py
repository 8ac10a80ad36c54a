"""The command line and environment that start a managed server, by kind.

    target.server (ServerSpec) + port ─► build_argv():
        command  spec.command with "{port}" filled
        jax      python -m servers.jax --port P --host 127.0.0.1 (+ preset or model, dtype,
                 slots, ...)
        vllm     servers.vllm.argv.build_vllm_argv on the Launcher that servers.vllm.launcher
                 resolved (a LaunchError becomes a one-line ScenarioError: the field, the hint)
    server_env(): loadgen's environment, ADDED_ENV (PYTHONUNBUFFERED=1), then spec.env
"""
from __future__ import annotations

import os
import sys
from typing import Optional

from loadgen.scenario.model import ScenarioError
from loadgen.scenario.target import ServerSpec
from servers.vllm.argv import build_vllm_argv, extra_args
from servers.vllm.launcher import Launcher, LaunchError, resolve_launcher

ADDED_ENV = {"PYTHONUNBUFFERED": "1"}     # what loadgen itself adds to the server's environment


def server_env(spec: ServerSpec) -> dict:
    """The server's environment: loadgen's, PYTHONUNBUFFERED=1, then ``spec.env``."""
    return {**os.environ, **ADDED_ENV, **spec.env}


def build_argv(spec: ServerSpec, port: int, launch: Optional[Launcher] = None) -> list[str]:
    """The command line that starts ``spec`` on 127.0.0.1:``port`` (vllm: ``launch`` resolved
    by servers.vllm.launcher.resolve_launcher, found here when not given)."""
    if spec.kind == "command":
        if not spec.command:
            raise ScenarioError("target.server.command: kind command needs an argv list")
        return [a.replace("{port}", str(port)) for a in spec.command]
    if spec.kind == "jax":
        argv = [sys.executable, "-m", "servers.jax"]
        if not spec.model:  # a model directory replaces the synthetic preset
            argv += ["--preset", spec.preset]
        argv += ["--port", str(port), "--host", "127.0.0.1"]
        for flag, val in (("--dtype", spec.dtype), ("--slots", spec.slots),
                          ("--max-model-len", spec.max_model_len),
                          ("--max-queue", spec.max_queue), ("--model", spec.model),
                          ("--interleave-chunk", spec.interleave_chunk),
                          ("--matmul", spec.matmul)):
            if val is not None:
                argv += [flag, str(val)]
        return argv + extra_args(spec.args)
    try:
        if launch is None:
            launch = resolve_launcher(spec.executable, server_env(spec))
        return build_vllm_argv(spec, port, prefix=launch.prefix)
    except LaunchError as e:     # one line: the field and the install hint
        raise ScenarioError(str(e)) from None
