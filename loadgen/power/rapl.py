"""CPU package, core, uncore and DRAM energy from Linux RAPL powercap files.

    {rapl_root}/intel-rapl:0/name = package-0, energy_uj, max_energy_range_uj
    {rapl_root}/intel-rapl:0/intel-rapl:0:0/name = dram | core | uncore

Each zone's ``energy_uj`` is a counter that wraps at ``max_energy_range_uj``; readings are raw J
with ``wrap_j`` so analysis unwraps them (sampling at 10 Hz sees every wrap: a package wraps every
tens of minutes). ``energy_uj`` is root-only since CVE-2020-8694; most VMs have no powercap at all.
The package zone contains core and uncore, so those are reported with their own scope and not added.
"""
from __future__ import annotations

import re
from pathlib import Path

from loadgen.power.base import PowerSource, Reading, SourceUnavailable

ZONE_RE = re.compile(r"^(intel|amd)-rapl:\d+(:\d+)?$")


def _scope(name: str) -> str:
    if name.startswith("package"):
        return "cpu_package"
    return {"dram": "dram", "core": "cpu_core", "uncore": "cpu_uncore", "psys": "platform"}.get(
        name, "platform")


class RaplSource(PowerSource):
    name = "rapl"
    scope = "cpu_package+dram"
    method = "counter"

    def open(self) -> None:
        root = Path(self.cfg.rapl_root)
        if not root.is_dir():
            raise SourceUnavailable(f"no {root} (a VM or a kernel without powercap has no RAPL)")
        zones = []
        for top in sorted(root.iterdir()):              # zones, then their subzones (one level)
            if ZONE_RE.match(top.name) and top.is_dir():
                zones.append(top)
                zones += sorted(s for s in top.iterdir() if ZONE_RE.match(s.name) and s.is_dir())
        self._zones: list[tuple[Path, str, str, float]] = []
        seen = set()
        for z in zones:
            real = z.resolve()
            if real in seen:                       # /sys links each zone under its parent too
                continue
            seen.add(real)
            try:
                name = (z / "name").read_text().strip()
                max_uj = float((z / "max_energy_range_uj").read_text().strip())
                (z / "energy_uj").read_text()
            except PermissionError:
                raise SourceUnavailable(f"permission denied reading {z}/energy_uj (root-only since "
                                        "CVE-2020-8694; run as root or relax its mode)") from None
            except (OSError, ValueError) as e:
                self.warn(f"zone {z.name} skipped: {e}")
                continue
            device = f"{name}" if name.startswith("package") else f"{z.name}/{name}"
            self._zones.append((z / "energy_uj", device, _scope(name), max_uj / 1e6))
            self.devices.append({"device": device, "zone": z.name, "scope": _scope(name),
                                 "method": "counter", "max_energy_range_j": max_uj / 1e6})
        if not self._zones:
            raise SourceUnavailable(f"no readable RAPL zones under {root}")

    def read(self) -> list[Reading]:
        out = []
        for path, device, scope, wrap_j in self._zones:
            uj = float(path.read_text().strip())
            out.append(Reading(device, scope, "energy_j", uj / 1e6, wrap_j))
        return out
