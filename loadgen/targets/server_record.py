"""run_dir/server.json: how a managed server was started and stopped, or why it failed.

    ManagedServer ─► ServerRecord(spec, run_dir, base_url, env_added).data, rewritten by write()
        at each step (so a failed launch leaves it too): argv, the env loadgen added
        (secret-looking values redacted), cwd, launch, pid, start / healthy / stop times,
        startup_s, status (not_started | starting | healthy | failed | stopped), the cause of a
        failure with the log's tail and hints for known install traps
        (servers.vllm.launcher.failure_hints), and the stop: signals sent, the one that ended it,
        exit code (negative: killed by that signal), whether it had exited before loadgen
        stopped it
    shown_argv(): the argv as recorded — secret flag values redacted, the CPU shim's program text
        shown as <CPU_SHIM>

Written through analysis.contract.ServerLife (named keys, schema_version); writing the record
never fails a run (a key outside the contract: the dict is written as it is, and the suite's
schema test, analysis.contract.validate_run_dir, is what flags it).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from analysis.contract import SCHEMA_VERSION, ContractError, ServerLife
from loadgen.scenario.target import ServerSpec
from servers.vllm.describe import SECRET_WORDS
from servers.vllm.launcher import Launcher, failure_hints
from loadgen.redact import MASK, redact

LIFECYCLE_FILE = "server.json"


def redact_env(env: dict) -> dict:
    """``env`` with the values of secret-looking keys (key, token, secret, password) hidden."""
    return {k: (MASK if any(w in k.lower() for w in SECRET_WORDS) else v)
            for k, v in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    argv = list(argv)
    for i in range(1, len(argv)):  # never store a key given on the command line
        if argv[i - 1].startswith("--") and any(w in argv[i - 1].lower() for w in SECRET_WORDS):
            argv[i] = MASK
    return argv


def shown_argv(argv: list[str], launch: Optional[Launcher]) -> list[str]:
    """``argv`` as server.json and sut.json show it (see the module docstring)."""
    argv = redact_argv(argv)
    if launch is not None and launch.shim:
        argv[:len(launch.prefix)] = launch.describe()["prefix"]
    return argv


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no server log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(server log is empty)"


class ServerRecord:
    """server.json's content (``data``, updated in place by the server) and its file."""

    def __init__(self, spec: ServerSpec, run_dir: str | Path, base_url: str, env_added: dict):
        self.path = Path(run_dir) / LIFECYCLE_FILE
        self.log_path = Path(run_dir) / "server.log"
        self.data: dict = {
            "schema_version": SCHEMA_VERSION, "kind": spec.kind, "status": "not_started",
            "argv": None,
            "env_added": redact_env(env_added),
            "env_inherited": "loadgen's own environment (not recorded)",
            "cwd": os.getcwd(), "cpus": spec.cpus, "base_url": base_url,
            "health_url": base_url + spec.health_path,
            "startup_timeout_s": spec.startup_timeout_s, "launch": None, "pid": None,
            "log": self.log_path.name, "started_at_unix": None, "healthy_at_unix": None,
            "startup_s": None, "port_warning": None, "cause": None, "hints": [], "log_tail": None,
            "stop": None}

    def write(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".json.tmp")
            try:
                data = ServerLife.dump(self.data)
            except ContractError:
                data = self.data
            tmp.write_text(redact(json.dumps(data, indent=2, default=str)) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass                          # the record must never be why a run fails

    def failed(self, cause: str, with_log: bool = False, status: str = "failed") -> None:
        lc = self.data
        lc["status"], lc["cause"] = status, cause
        if with_log:
            lc["log_tail"] = log_tail(self.log_path, 40)
            try:
                text = self.log_path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            lc["hints"] = failure_hints(text)
        self.write()

    def hint_text(self) -> str:
        return "".join(f"\nhint: {h}" for h in self.data["hints"])
