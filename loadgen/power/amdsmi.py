"""AMD GPU energy through amdsmi (ROCm's Python bindings, imported lazily).

Per GPU in ``power.gpu_indices``: the energy accumulator (``amdsmi_get_energy_count``: accumulator
x counter_resolution uJ) read every sample, and socket power (``amdsmi_get_power_info``) as the
timeline. At open the counter is validated against integrated power over a short window
(``VALIDATE_S``; meta.json keeps its figures as ``probe_counter_w`` / ``probe_samples_w``): counters
that stand still or disagree by more than ``TOLERANCE`` (reported for some parts, e.g. ROCm/amdsmi
issue 22) are dropped in favour of integrated power samples, with a warning.
"""
from __future__ import annotations

import time

from loadgen.power.base import PowerSource, Reading, SourceUnavailable

VALIDATE_S = 1.0
TOLERANCE = 0.25


def _num(v):
    """amdsmi returns numbers, 'N/A' strings, or {'value': x, 'unit': u} dicts by version."""
    if isinstance(v, dict):
        v = v.get("value")
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class AmdSmiSource(PowerSource):
    name = "amdsmi"
    scope = "gpu"
    method = "counter"

    def open(self) -> None:
        self._a = a = self.load_library("amdsmi", "amdsmi is not installed (it ships with ROCm)",
                                        "amdsmi_init", "amdsmi_shut_down")
        handles = a.amdsmi_get_processor_handles()
        idx = self.pick_gpus(len(handles), "amdsmi")
        self._gpus = [[f"gpu{i}", handles[i], True] for i in idx]
        self._validate()

    def _energy_j(self, h):
        d = self._a.amdsmi_get_energy_count(h)
        acc = _num(d.get("energy_accumulator", d.get("power")))
        res = _num(d.get("counter_resolution"))
        return None if acc is None or res is None else acc * res / 1e6

    def _power_w(self, h):
        d = self._a.amdsmi_get_power_info(h)
        for key in ("current_socket_power", "average_socket_power", "socket_power"):
            w = _num(d.get(key))
            if w is not None:
                return w
        return None

    def _validate(self) -> None:
        """Counter-derived mean power vs. mean sampled power over VALIDATE_S."""
        for g in self._gpus:
            dev, h, _ = g
            try:
                e0, t0 = self._energy_j(h), time.perf_counter()
                ws = []
                while time.perf_counter() - t0 < VALIDATE_S:
                    ws.append(self._power_w(h))
                    time.sleep(VALIDATE_S / 10)
                e1, t1 = self._energy_j(h), time.perf_counter()
            except Exception as e:
                raise SourceUnavailable(f"{dev}: reading energy/power failed: {e}") from None
            ws = [w for w in ws if w is not None]
            p_counter = (e1 - e0) / (t1 - t0) if e0 is not None and e1 is not None else None
            p_samples = sum(ws) / len(ws) if ws else None
            ok = (p_counter is not None and p_counter > 0 and p_samples
                  and abs(p_counter - p_samples) <= TOLERANCE * p_samples)
            if not ok:
                g[2] = False
                self.warn(f"{dev}: energy counter failed validation (counter {p_counter} W vs "
                          f"samples {p_samples} W); integrating power samples instead")
            self.devices.append({"device": dev, "method": "counter" if ok else "integrated_power",
                                 "probe_counter_w": p_counter, "probe_samples_w": p_samples})
        if not any(g[2] for g in self._gpus):
            self.method = "integrated_power"

    def read(self) -> list[Reading]:
        out = []
        for dev, h, use_counter in self._gpus:
            if use_counter:
                e = self._energy_j(h)
                if e is not None:
                    out.append(Reading(dev, "gpu", "energy_j", e))
            w = self._power_w(h)
            if w is not None:
                out.append(Reading(dev, "gpu", "power_w", w))
        return out
