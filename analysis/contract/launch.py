"""sut.json ``managed_server.sut``: what loadgen recorded about a server it started itself
(servers.vllm.describe.describe_server: its flags, the host's GPU inventory, vLLM's version).

    servers.vllm.describe ─► sut.json managed_server.sut (kept as given: Sut stays as written)
        ─► LaunchDescription.read ─► analysis.report.sut (versions, precision),
           analysis.report.conditions (device unit, batch, memory)

Open: the keys the report reads are named and typed (a misspelt one is an AttributeError, not a
silent None), the rest kept as described. ``flags`` is a mapping by flag name. A block of the
wrong shape (an older writer's) reads as absent, as the report always treated it.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import Field, field_validator

from analysis.contract.base import Open


class Unavailable(Open):
    """servers.vllm.launcher.unavailable: an answer that could not be had, and why."""
    status: Optional[str] = None
    reason: Optional[str] = None


class VllmVersion(Open):
    """servers.vllm.describe.vllm_version: each way of asking (a version text, or why not) and
    the first that answered."""
    server: Optional[Union[str, Unavailable]] = Field(None, description="GET /version")
    package: Optional[Union[str, Unavailable]] = Field(None, description="package metadata")
    cli: Optional[Union[str, Unavailable]] = Field(None, description="vllm --version")
    version: Optional[str] = None


class Gpu(Open):
    """One GPU of the host's inventory (nvidia-smi or NVML)."""
    name: Optional[str] = Field(None, description="the product name, as the driver gives it")
    driver_version: Optional[str] = None


class GpuInventory(Unavailable):
    """servers.vllm.describe.gpu_inventory: {source, gpus}, or unavailable (status, reason)."""
    source: Optional[str] = Field(None, description="nvidia-smi | nvml")
    gpus: list[Gpu] = Field(default_factory=list)


class LaunchDescription(Open):
    """managed_server.sut as the report reads it."""
    kind: Optional[str] = None
    flags: dict[str, Any] = Field(default_factory=dict, description="the launch flags by name")
    cuda_visible_devices: Optional[str] = None
    gpus: Optional[GpuInventory] = None
    version: Optional[VllmVersion] = None

    @field_validator("flags", "gpus", "version", mode="before")
    @classmethod
    def _a_mapping_or_absent(cls, v: Any, info) -> Any:
        if isinstance(v, dict):
            return v
        return {} if info.field_name == "flags" else None
