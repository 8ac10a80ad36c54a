"""NVIDIA GPU energy and power through NVML (nvidia-ml-py, imported lazily).

Per GPU in ``power.gpu_indices`` (NVML indices, nvidia-smi order; None: all):
  - energy: ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since driver load, Volta and newer), read
    every sample and right after each mark, so window energy is a counter difference;
  - power timeline: ``nvmlDeviceGetFieldValues`` with ``NVML_FI_DEV_POWER_INSTANT`` (scope GPU), mW.
    Where that field is missing, ``nvmlDeviceGetPowerUsage`` is used with a warning: on Ampere and
    later it is a 1 s average, unfit for short windows.
A GPU without the counter (pre-Volta) is marked method "integrated_power" and analysis integrates
its power samples by the trapezoid rule.
"""
from __future__ import annotations

from loadgen.power.base import PowerSource, Reading

# c_nvmlValue_t members by NVML_VALUE_TYPE_* (0 double, 1 uint, 2 ulong, 3 ulonglong, 4 sll, 5 sint, 6 ushort)
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class NvmlSource(PowerSource):
    name = "nvml"
    scope = "gpu"
    method = "counter"

    def open(self) -> None:
        self._nv = nv = self.load_library(
            "pynvml", "nvidia-ml-py is not installed (pip install nvidia-ml-py)", "nvmlInit",
            "nvmlShutdown", error="NVMLError", hint=" (no NVIDIA driver or GPU here)")
        indices = self.pick_gpus(nv.nvmlDeviceGetCount(), "NVML")
        self._gpus = []
        self._field = [(nv.NVML_FI_DEV_POWER_INSTANT, getattr(nv, "NVML_POWER_SCOPE_GPU", 0))]
        for i in indices:
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = nv.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            try:
                nv.nvmlDeviceGetTotalEnergyConsumption(h)
                has_counter = True
            except nv.NVMLError as e:
                has_counter = False
                self.warn(f"gpu{i}: no energy counter ({e}); integrating power samples instead")
            instant = self._instant_w(h) is not None
            if not instant:
                self.warn(f"gpu{i}: NVML_FI_DEV_POWER_INSTANT unavailable; using "
                          "nvmlDeviceGetPowerUsage (a 1 s average on Ampere and later)")
            self._gpus.append((f"gpu{i}", h, has_counter, instant))
            self.devices.append({"device": f"gpu{i}", "name": name, "index": i,
                                 "method": "counter" if has_counter else "integrated_power",
                                 "power_field": "POWER_INSTANT" if instant else "PowerUsage (1 s avg)"})
        if not all(g[2] for g in self._gpus):
            self.method = "counter" if any(g[2] for g in self._gpus) else "integrated_power"

    def _instant_w(self, h):
        try:
            v = self._nv.nvmlDeviceGetFieldValues(h, self._field)[0]
        except self._nv.NVMLError:
            return None
        if v.nvmlReturn != 0:
            return None
        return float(getattr(v.value, _VALUE_MEMBER.get(int(v.valueType), "uiVal"))) / 1000.0

    def read(self) -> list[Reading]:
        nv, out = self._nv, []
        for dev, h, has_counter, instant in self._gpus:
            if has_counter:
                mj = nv.nvmlDeviceGetTotalEnergyConsumption(h)
                out.append(Reading(dev, "gpu", "energy_j", mj / 1000.0))
            w = self._instant_w(h) if instant else None
            if w is None:
                w = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
            out.append(Reading(dev, "gpu", "power_w", w))
        return out
