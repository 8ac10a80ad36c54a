"""The device catalogue keeps the seed's conditions and every figure's evidence."""
import pytest

from analysis.roofline import devices
from analysis.roofline import bounds


def test_every_figure_has_evidence_and_source():
    for key, spec in devices.CATALOGUE.items():
        figs = list(spec.peak.values()) + list(spec.other.values()) + [spec.mem_bandwidth,
                                                                        spec.mem_capacity]
        for f in figs:
            assert f is not None, key
            assert f.evidence in {"documented", "calculated", "measured", "unpublished",
                                  "unmeasured"}, key
            assert f.source, key
            if f.value is None:
                assert f.reason, f"{key}: a missing figure must say why"


def test_h100_dense_is_half_the_sparse_figure():
    h = devices.get("h100-sxm")
    assert h.other["bf16_sparse"].value == 1979e12
    assert h.peak_flops("bf16") == pytest.approx(989.5e12)
    assert "sparsity" in h.peak["bf16"].conditions
    assert h.bandwidth() == 3.35e12
    assert h.other["nvlink"].value == 900e9 and h.other["pcie_gen5"].value == 128e9


def test_h200_and_a100_datasheet_figures():
    h = devices.get("h200")
    assert h.bandwidth() == 4.8e12 and h.mem_capacity.value == 141e9
    assert h.peak_flops("bf16") == pytest.approx(989.5e12)
    a = devices.get("a100-sxm4-40gb")
    assert a.bandwidth() == 1555e9
    assert a.peak_flops("bf16") == 312e12 and a.peak_flops("fp32") == 19.5e12
    assert a.peak_flops("tf32") == 156e12
    assert "datasheet" in a.peak["bf16"].source.lower()


def test_tpu_v5e_binary_units():
    t = devices.get("tpu-v5e")
    assert t.bandwidth() == 858_993_459_200
    assert t.peak_flops("bf16") == 197e12
    assert t.peak_flops("fp32") is None        # not published per chip: the bound is memory-only
    b = bounds.bound(1e9, 1e9, t, "fp32")
    assert not b.complete and b.binding == "memory"


def test_288v_npu_bandwidth_unpublished():
    n = devices.get("core-ultra-9-288v-npu")
    assert n.bandwidth() is None
    assert n.mem_bandwidth.evidence == "unpublished" and "publish" in n.mem_bandwidth.reason
    assert n.other["int8"].value == 48e12 and n.other["platform_int8"].value == 120e12
    assert bounds.bound(1e9, 1e9, n, "fp16").time_s is None


def test_find_by_runtime_name():
    assert devices.find("NVIDIA H200").name == "NVIDIA H200"
    assert devices.find("NVIDIA A100-SXM4-40GB").name == "NVIDIA A100-SXM4-40GB"
    assert devices.find("TPU v5 lite").name == "Google Cloud TPU v5e"
    assert devices.find("Some Other GPU") is None
    assert devices.find("NVIDIA H200 NVL") is None          # another part, other rates
    with pytest.raises(KeyError, match="known"):
        devices.get("nope")


def test_save_and_load_roundtrip(tmp_path):
    spec = devices.get("a100-sxm4-40gb")
    p = devices.save_spec(spec, tmp_path / "a" / "spec.json")
    back = devices.load_spec(p)
    assert back.peak_flops("bf16") == 312e12 and back.bandwidth() == 1555e9
    assert back.peak["bf16"].evidence == "documented"
    assert back.to_dict() == spec.to_dict()
