"""device.json: the device spec the run's roofline uses, frozen into the run directory.

    loadgen/run/calibration.py freeze_device ─► analysis.roofline.run_device.record ─► Device.dump
        ─► RUN/device.json ─► frozen.for_run ─► analysis.roofline.run_roofline ─► summary "roofline"

``status``: "recorded" (``spec`` holds the figures, ``how`` says how it was chosen) or "none"
(``reason`` says why there was no spec at run time; a later report does not look again).
``spec`` is analysis.roofline.devices.DeviceSpec.to_dict(): every figure with its unit, evidence
(documented | calculated | measured | unmeasured | unpublished), source and conditions; a
calibration's ``meta`` says when, where and how it was measured and the host's load meanwhile.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, model_validator

from analysis.contract.base import Model, Open, RunFile


class Figure(Model):
    """One number (analysis.roofline.devices.Figure): None with ``reason`` when not published."""
    value: Optional[float] = Field(None, description="in ``unit``; null: not published/measured")
    unit: str = Field(description="FLOP/s | OP/s | B/s | B")
    evidence: str = Field(description="documented | calculated | measured | unmeasured | "
                                      "unpublished")
    source: str = ""
    conditions: str = ""
    reason: str = Field("", description="why value is null")


class HostLoad(Open):
    """analysis.roofline.host_load: the host's load while a calibration ran (busy or not)."""
    busy: Optional[bool] = None
    reasons: list[str] = Field(default_factory=list)
    label: Optional[str] = None
    loadavg_1m: Optional[float] = None
    ncpu: Optional[int] = None
    other_cpus: Optional[float] = None
    steal_fraction: Optional[float] = None
    seconds: Optional[float] = None
    spreads: Optional[dict[str, Optional[float]]] = None
    attempts: Optional[list[dict[str, Any]]] = None


class CacheSave(Open):
    """Where and when the calibration cache saved a calibration."""
    version: Optional[int] = None
    path: Optional[str] = None
    saved_at: Optional[str] = None
    saved_by_pid: Optional[int] = None
    saved_on: Optional[str] = None


class SpecMeta(Open):
    """A calibration's provenance (analysis.roofline.calibrate); {} for a catalogue entry."""
    evidence: Optional[str] = Field(None, description="measured, or measured (busy host: ...)")
    date: Optional[str] = Field(None, description="when it was measured (ISO 8601)")
    host: Optional[str] = Field(None, description="where it was measured (hostname)")
    kind: Optional[str] = None
    device_name: Optional[str] = None
    platform: Optional[str] = None
    methods: Optional[dict[str, Any]] = None
    host_load: Optional[HostLoad] = None
    cache: Optional[CacheSave] = Field(
        None, description="the calibration cache's save (analysis.roofline.calib_cache)")


class DeviceSpec(Model):
    """analysis.roofline.devices.DeviceSpec.to_dict(): one chip (or the unit named in scope)."""
    name: str
    scope: str = ""
    peak: dict[str, Figure] = Field(default_factory=dict, description="dtype -> dense peak rate")
    mem_bandwidth: Optional[Figure] = Field(None, description="the main memory boundary, B/s")
    mem_capacity: Optional[Figure] = None
    other: dict[str, Figure] = Field(default_factory=dict, description="sparse rates, links, ...")
    match: list[str] = Field(default_factory=list)
    notes: str = ""
    meta: SpecMeta = Field(default_factory=SpecMeta)


class Device(RunFile):
    """device.json (docs/architecture.md, "The run directory"; docs/roofline.md)."""
    status: Literal["recorded", "none"]
    frozen_at: Optional[str] = Field(None, description="when it was frozen (ISO 8601, UTC)")
    frozen_on: Optional[str] = Field(None, description="the host that froze it")
    how: Optional[str] = Field(None, description="how the spec was chosen (status recorded)")
    reason: Optional[str] = Field(None, description="why there is no spec (status none)")
    spec: Optional[DeviceSpec] = None
    calibration: Optional[dict[str, Any]] = Field(
        None, description="a calibration's provenance (analysis.roofline.calib_cache.provenance):"
                          " by_this_run, the cache path and version, saved_at and saved_by_pid, "
                          "measured_at/on, evidence, busy and why, the host's load then")

    @model_validator(mode="after")
    def _status_matches_spec(self):
        if self.status == "recorded" and self.spec is None:
            raise ValueError("status 'recorded' without a spec")
        if self.status == "none" and self.spec is not None:
            raise ValueError("status 'none' with a spec")
        return self
