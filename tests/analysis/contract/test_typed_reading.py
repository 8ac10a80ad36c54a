"""Typed reading (issue 37): analysis reads run-directory files through analysis.contract's
models as attributes, so a misspelt key fails loudly instead of reading None and dropping a
figure; a figure that is missing stays None (never 0). Pure, byte-fed: no run directory."""
from __future__ import annotations

import pytest

from analysis.contract import RunMeta, Summary, Sut
from analysis.contract.summary_blocks import ModelFigures
from analysis.contract.summary import Replica
from analysis.contract.sweep import Frontier, SweepFile
from analysis.report import compare, served

SUMMARY = {"mode": "server", "goodput": None, "energy": {"status": "measured", "energy_j": 5.0},
           "prefix_cache": {"server_hit_rate": 0.25, "requests_hit": 2, "requests_miss": 2},
           "roofline": {"status": "calculated", "device": {"name": "h100"}},
           "spec_decode": {"status": "measured", "draft_tokens": 300}}


def test_a_misspelt_field_raises_instead_of_reading_none():
    s = Summary.read(SUMMARY)
    assert s.goodput is None and s.energy.energy_j == 5.0          # missing: None, not 0
    for read in (lambda: s.goodptu, lambda: s.energy.energy_jj, lambda: s.roofline.devise,
                 lambda: s.spec_decode.draft_token, lambda: RunMeta.read({}).modle,
                 lambda: Sut.read({}).client_hots):
        with pytest.raises(AttributeError):
            read()


def test_a_report_helper_given_a_misspelt_key_raises():
    pc = Summary.read(SUMMARY).prefix_cache
    assert served._pct(pc, "server_hit_rate") == "25.0 %"
    with pytest.raises(AttributeError):
        served._pct(pc, "server_hit_rat")
    with pytest.raises(AttributeError):
        compare._value(Summary.read(SUMMARY), "goodptu")


def test_extra_keys_are_kept_and_missing_blocks_stay_none():
    s = Summary.read({**SUMMARY, "a_newer_writers_key": 1})
    assert s.a_newer_writers_key == 1 and s.stages is None and s.server_metrics is None
    sw = SweepFile.read({"points": [{"value": 4, "run_dir": "concurrency-4"}]})
    assert sw.points[0].value == 4 and isinstance(sw.points[0].value, int)   # 4, not 4.0
    fr = Frontier.read({"points": [{"x": 1.5, "y": None, "valid": False}]})
    assert fr.points[0].y is None and fr.points[0].valid is False


def test_a_replica_is_a_model_figures_with_its_url():
    r = Replica.read({"url": "http://a", "requests": 3, "ttft_ms": {"p50": 1.0, "p99": 2.0}})
    assert isinstance(r, ModelFigures) and r.ttft_ms.p99 == 2.0 and r.share is None
    assert set(ModelFigures.model_fields) | {"url"} == set(Replica.model_fields)


def test_sweep_point_rows_and_power_rows_read_typed():
    from analysis.contract.power import PowerRow
    from analysis.contract.sweep import SweepPoint
    p = SweepPoint.read({"value": 4, "run_dir": "c-4", "interactivity_tok_s": {"p50": 40},
                         "output_throughput_per_accelerator": None,
                         "capacity_reasons": {"output_throughput_per_accelerator": "no GPU"}})
    assert p.value == 4 and p.interactivity_tok_s.p50 == 40.0 and p.cost is None
    assert p.output_throughput_per_accelerator is None and p.valid is None
    mark = PowerRow.read({"t_ns": 5, "source": "session", "kind": "mark", "value": "measure_start"})
    joules = PowerRow.read({"t_ns": 6, "source": "nvml", "kind": "energy_j", "value": 12,
                            "device": 0, "wrap_j": 2.0 ** 32})
    assert mark.value == "measure_start" and joules.value == 12.0 and joules.device == 0
    for read in (lambda: p.interactivity, lambda: joules.wrap, lambda: mark.knid):
        with pytest.raises(AttributeError):
            read()


def test_a_managed_servers_launch_description_reads_typed():
    from analysis.contract.launch import LaunchDescription, Unavailable
    d = LaunchDescription.read({"flags": {"dtype": "bf16"}, "gpus": {"source": "nvml", "gpus": [
        {"name": "H100", "driver_version": "550", "uuid": "GPU-1"}]}, "version": {
        "server": {"status": "unavailable", "reason": "HTTP 404"}, "package": "0.6.3",
        "version": "0.6.3"}})
    assert d.flags["dtype"] == "bf16" and d.gpus.gpus[0].name == "H100"
    assert isinstance(d.version.server, Unavailable) and d.version.package == "0.6.3"
    old = LaunchDescription.read({"flags": None, "gpus": "n/a", "version": "0.5"})
    assert old.flags == {} and old.gpus is None and old.version is None   # as the report did
    for read in (lambda: d.gpu, lambda: d.gpus.gpus[0].driver, lambda: d.version.packge):
        with pytest.raises(AttributeError):
            read()
