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
