"""The GPU libraries' sources (loadgen.power.nvml, loadgen.power.amdsmi) on fake library modules:
power.gpu_indices checked against the GPUs the library sees (one line naming the field), and the
library shut down once however often the source is closed. No hardware, no sleeps."""
from __future__ import annotations

import sys
import types

import pytest

from loadgen.power.amdsmi import AmdSmiSource
from loadgen.power.base import SourceUnavailable
from loadgen.power.nvml import NvmlSource
from loadgen.scenario.model import Power


def _fake_nvml(count: int, calls: list) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    nv.NVMLError = type("NVMLError", (Exception,), {})
    nv.nvmlInit = lambda: calls.append("init")
    nv.nvmlShutdown = lambda: calls.append("down")
    nv.nvmlDeviceGetCount = lambda: count
    return nv


def _fake_amdsmi(count: int, calls: list) -> types.ModuleType:
    a = types.ModuleType("amdsmi")
    a.amdsmi_init = lambda: calls.append("init")
    a.amdsmi_shut_down = lambda: calls.append("down")
    a.amdsmi_get_processor_handles = lambda: [f"h{i}" for i in range(count)]
    return a


@pytest.mark.parametrize("cls,module,fake,library", [
    (NvmlSource, "pynvml", _fake_nvml, "NVML"), (AmdSmiSource, "amdsmi", _fake_amdsmi, "amdsmi")])
@pytest.mark.parametrize("count,indices,reason", [
    (2, [0, 5], "power.gpu_indices: [5] not present (2 GPU(s) visible)"),
    (2, [-1], "power.gpu_indices: [-1] not present (2 GPU(s) visible)"),
    (0, None, "{library} sees no GPU"),
])
def test_gpu_indices_refused_in_one_line_and_the_library_shut_down_once(
        monkeypatch, cls, module, fake, library, count, indices, reason):
    calls: list = []
    monkeypatch.setitem(sys.modules, module, fake(count, calls))
    src = cls(Power(sources=[cls.name], gpu_indices=indices))
    with pytest.raises(SourceUnavailable) as e:
        src.open()
    assert str(e.value) == reason.format(library=library)
    src.close()
    src.close()
    assert calls == ["init", "down"]


def test_a_source_never_opened_closes_without_a_call():
    NvmlSource(Power(sources=["nvml"])).close()
    AmdSmiSource(Power(sources=["amdsmi"])).close()
