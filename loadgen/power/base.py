"""The power-source interface: every sampler states its scope, method and sampling rate.

A source is opened once (``open`` raises ``SourceUnavailable`` with a one-line reason when the
hardware, library or permission is missing), then ``read`` is called from its own sampler thread
about ``sample_hz`` times a second and returns ``Reading``s. ``clock`` (ns) is the session's clock
(the records' ``time.perf_counter_ns``, or a test's): a source that keeps its own times (DCGM's
refresh times) reads it, never the wall clock, so a test can drive it. ``describe`` is what ``stop()``
reports: name, scope, method ("counter" | "integrated_power" | "estimate"), evidence
("measured" | "estimated"), requested and achieved sampling rate, devices, warnings. The GPU
libraries' sources (nvml, amdsmi) share ``load_library`` (import and init, each failure one line),
``pick_gpus`` (power.gpu_indices checked against the GPUs the library sees) and ``close`` (the
library's shutdown, once).
"""
from __future__ import annotations

import contextlib
import importlib
import time
from dataclasses import dataclass
from typing import Callable, Optional

from loadgen.scenario.model import Power

# scopes that analysis.energy.window adds into the total: gpu + cpu_package + dram
SCOPES = ("gpu", "cpu_package", "dram", "cpu_core", "cpu_uncore", "platform", "system")


class SourceUnavailable(RuntimeError):
    """This source cannot measure here; ``str()`` is the one-line reason."""


@dataclass
class Reading:
    device: str                   # "gpu0", "package-0", "host:gpu1", ...
    scope: str                    # one of SCOPES
    kind: str                     # "energy_j" (cumulative counter, raw) | "power_w"
    value: float
    wrap_j: Optional[float] = None  # counters that wrap: the range in J (RAPL max_energy_range_uj)


class PowerSource:
    """Base class; subclasses set ``name``, ``scope``, ``method`` and implement open/read."""

    name = "base"
    scope = "gpu"
    method = "counter"
    evidence = "measured"
    _shut_down: Optional[Callable[[], object]] = None    # a library's, once its init succeeded

    def __init__(self, cfg: Power):
        self.cfg = cfg
        self.period_s = 1.0 / cfg.sample_hz
        self.clock: Callable[[], int] = time.perf_counter_ns     # the session sets its own
        self.warnings: list[str] = []
        self.devices: list[dict] = []        # one dict per device: name, method, ...
        self.status = "ok"
        self.reason: Optional[str] = None

    def open(self) -> None:
        """Find the devices; raise SourceUnavailable(reason) when this source cannot work here."""

    def read(self) -> list[Reading]:
        raise NotImplementedError

    def close(self) -> None:
        """Release the library or connection; must not raise. Here: the library's shutdown
        (``_shut_down``, set by ``open`` after the init), called once."""
        shut, self._shut_down = self._shut_down, None
        if shut is not None:
            with contextlib.suppress(Exception):
                shut()

    def load_library(self, module: str, missing: str, init: str, shut_down: str,
                     error: Optional[str] = None, hint: str = ""):
        """The GPU library ``module``, imported (SourceUnavailable ``missing`` when it is not
        installed) and initialised by its function ``init`` (SourceUnavailable "INIT failed:
        ERROR HINT" when the library's ``error`` class, or any Exception, comes out); its
        ``shut_down`` is then what ``close`` calls. Returns the module."""
        try:
            lib = importlib.import_module(module)
        except ImportError:
            raise SourceUnavailable(missing) from None
        try:
            getattr(lib, init)()
        except (getattr(lib, error) if error else Exception) as e:
            raise SourceUnavailable(f"{init} failed: {e}{hint}") from None
        self._shut_down = getattr(lib, shut_down)
        return lib

    def pick_gpus(self, count: int, library: str) -> list[int]:
        """``power.gpu_indices`` (None: all) among the ``count`` GPUs ``library`` sees;
        SourceUnavailable naming the field when one is not there, or when there is none."""
        if count == 0:
            raise SourceUnavailable(f"{library} sees no GPU")
        idx = self.cfg.gpu_indices if self.cfg.gpu_indices is not None else list(range(count))
        bad = [i for i in idx if i < 0 or i >= count]
        if bad:
            raise SourceUnavailable(f"power.gpu_indices: {bad} not present ({count} GPU(s) visible)")
        return idx

    def linger_s(self) -> float:
        """How long after the last edge the sampler must keep reading (DCGM: one collection
        interval, so the window end is covered)."""
        return 0.0

    def warn(self, msg: str) -> None:
        if msg not in self.warnings and len(self.warnings) < 20:
            self.warnings.append(msg)

    def describe(self) -> dict:
        return {"name": self.name, "status": self.status, "reason": self.reason,
                "scope": self.scope, "method": self.method, "evidence": self.evidence,
                "sample_hz": self.cfg.sample_hz, "devices": self.devices,
                "warnings": list(self.warnings)}
