"""sut.json (what was measured, from where) and server.json (a managed server's life).

    loadgen/targets/sut.py describe_sut ─► Sut.dump ─► sut.json ─► Sut.read ─► report, roofline
    loadgen/targets/server_record.py ServerRecord.write ─► ServerLife.dump ─► server.json

What a server says about itself (/v1/models, /info, /version, /props) is the server's business:
those blocks are kept as given (dicts); the keys around them are named.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from analysis.contract.base import Open, RunFile


class ClientHost(Open):
    """The load generator's host (loadgen.targets.sut.client_host)."""
    hostname: Optional[str] = None
    cpu_count: Optional[int] = None
    cpu_affinity: Optional[int] = None
    memory_bytes: Optional[int] = None
    python: Optional[str] = None
    platform: Optional[str] = None
    machine: Optional[str] = None
    processor: Optional[str] = None
    packages: dict[str, Optional[str]] = Field(default_factory=dict)


class ManagedServer(Open):
    """loadgen.targets.managed.ManagedServer.describe(): how loadgen started the server."""
    kind: Optional[str] = None
    argv: Optional[list[str]] = None
    cpus: Optional[list[int]] = None
    base_url: Optional[str] = None
    pid: Optional[int] = None
    startup_s: Optional[float] = None
    info: Optional[dict[str, Any]] = Field(None, description="the server's GET /info, as given")
    sut: Optional[dict[str, Any]] = Field(None, description="servers.vllm.describe: flags, GPUs")


class ServerVersion(Open):
    version: Optional[str] = None
    source: Optional[str] = None
    reason: Optional[str] = None


class Sut(RunFile):
    """sut.json (docs/architecture.md, "The run directory")."""
    target_url: Optional[str] = None
    endpoint: Optional[str] = None
    model: Optional[str] = None
    models: Optional[Any] = Field(None, description="GET /v1/models' JSON, as given")
    models_status: Optional[int] = None
    models_error: Optional[str] = None
    response_headers: Optional[dict[str, str]] = None
    completion_response_headers: Optional[dict[str, str]] = None
    managed_server: Optional[ManagedServer] = None
    server_info: Optional[dict[str, Any]] = Field(
        None, description="GET /info (the managed server's or the target's), as given")
    server_version: Optional[ServerVersion] = None
    server_props: Optional[dict[str, Any]] = Field(None, description="llama-server's /props")
    client_host: Optional[ClientHost] = None
    device: Optional[dict[str, Any]] = Field(
        None, description="the device spec the roofline used, frozen into the run")
    accelerators: Optional[int] = Field(
        None, description="target.accelerators: how many accelerators serve the target (the "
                          "per-accelerator figures divide by it); absent: written before the key")

    @property
    def info(self) -> dict[str, Any]:
        """The server's own description (GET /info): server_info, else the managed server's;
        {} for a server without one."""
        info = self.server_info or (self.managed_server.info if self.managed_server else None)
        return info if isinstance(info, dict) else {}


class ServerStop(Open):
    requested_at_unix: Optional[float] = None
    exited_before_stop: Optional[bool] = None
    signals_sent: list[str] = Field(default_factory=list)
    signal: Optional[str] = None
    exit_code: Optional[int] = None
    exit_signal: Optional[str] = None


class ServerLife(RunFile):
    """server.json: a managed server's start, health and stop, or why it failed."""
    kind: Optional[str] = None
    status: Literal["not_started", "starting", "healthy", "failed", "stopped"]
    argv: Optional[list[str]] = None
    env_added: dict[str, str] = Field(default_factory=dict)
    env_inherited: Optional[str] = None
    cwd: Optional[str] = None
    cpus: Optional[list[int]] = None
    base_url: Optional[str] = None
    health_url: Optional[str] = None
    startup_timeout_s: Optional[float] = None
    launch: Optional[dict[str, Any]] = Field(None, description="which vLLM (servers.vllm.launcher)")
    pid: Optional[int] = None
    log: Optional[str] = None
    started_at_unix: Optional[float] = None
    healthy_at_unix: Optional[float] = None
    startup_s: Optional[float] = None
    port_warning: Optional[str] = None
    cause: Optional[str] = None
    hints: list[str] = Field(default_factory=list)
    log_tail: Optional[str] = None
    stop: Optional[ServerStop] = None
