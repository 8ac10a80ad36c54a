"""loadgen/scenario/strict.py: an unknown key is named with the closest field ("did you mean")."""
from __future__ import annotations

import pytest

from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import Scenario
from loadgen.scenario.strict import ScenarioError, unknown_key

BASE = {"target": {"url": "http://127.0.0.1:1"},
        "load": {"mode": "server", "rate": 1, "num_requests": 2}}


@pytest.mark.parametrize("loc,msg", [
    (("lod",), "unknown key (did you mean 'load'?)"),
    (("load", "concurency"), "unknown key (did you mean 'concurrency'?)"),
    (("target", "server", "prest"), "unknown key (did you mean 'preset'?)"),
    (("load", "stages", 0, "duratio"), "unknown key (did you mean 'duration_s'?)"),
    (("api", "zzzz"), "unknown key"),
    (("nothing", "here"), "unknown key"),
])
def test_unknown_key_suggests_the_closest_field(loc, msg):
    assert unknown_key(Scenario, loc) == msg


def test_a_typo_in_the_file_or_in_set_is_one_line_with_a_suggestion():
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(BASE, ["api.modle=x"])
    assert str(e.value) == "api.modle: unknown key (did you mean 'model'?)"
    with pytest.raises(ScenarioError) as e:      # the typo, not the "missing" field it causes
        scenario_from_dict({"target": BASE["target"], "lod": BASE["load"]})
    assert str(e.value).startswith("lod: unknown key (did you mean 'load'?)")
