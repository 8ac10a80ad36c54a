"""bench.house on this tree: issue 37's static limits hold (a copy of a rule added anywhere
under loadgen/ fails here), and each check finds what it counts (fed a small tree)."""
from pathlib import Path

import pytest

from bench import house

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def h():
    return house.house(ROOT)


def test_the_hangup_rule_lives_in_two_modules_at_most(h):
    assert h["rule_counts"]["hangup"] <= house.LIMITS["hangup"], h["rule_modules"]["hangup"]
    assert "loadgen/client/hangup.py" in h["rule_modules"]["hangup"]


def test_the_redirect_rule_lives_in_two_modules_at_most(h):
    assert h["rule_counts"]["redirect"] <= house.LIMITS["redirect"], h["rule_modules"]["redirect"]
    assert "loadgen/client/http1/redirects.py" in h["rule_modules"]["redirect"]


def test_three_modules_at_most_branch_on_the_load_mode(h):
    assert h["rule_counts"]["load_mode"] <= house.LIMITS["load_mode"], h["rule_modules"]["load_mode"]
    assert "loadgen/engine/core/pacing.py" in h["rule_modules"]["load_mode"]


def test_no_module_over_400_lines_and_the_engines_small(h):
    assert h["over_400"] == []
    assert h["locust_procs_lines"] <= house.LIMITS["locust_procs_lines"]
    assert h["packages"]["loadgen/client"]["modules"] > 10 and h["record_sites"] >= 1


def test_each_check_finds_a_copy(tmp_path):
    for t in house.TREES:
        (tmp_path / t / "scenario").mkdir(parents=True)
    (tmp_path / "loadgen" / "scenario" / "m.py").write_text("after_ms = 1\nif mode == 'x': pass\n")
    (tmp_path / "loadgen" / "a.py").write_text("h.after_tokens\nHops(u, p)\nif ld.mode in (1,):\n"
                                               "    r = Record(id=1)\n")
    (tmp_path / "loadgen" / "b.py").write_text("x = 1\n" * 401)
    (tmp_path / "analysis" / "c.py").write_text("d.get('a')\nd.get('b')\n")
    got = house.house(tmp_path)
    assert got["rule_modules"] == {"hangup": ["loadgen/a.py"], "redirect": ["loadgen/a.py"],
                                   "load_mode": ["loadgen/a.py"]}
    assert got["record_sites"] == 1 and got["analysis_get"] == 2
    assert got["over_400"] == ["loadgen/b.py"] and got["largest"][0] == ["loadgen/b.py", 401]
    assert got["packages"]["loadgen"] == {"modules": 2, "lines": 405}


def test_it_prints_a_table_and_one_json_line(capsys, tmp_path):
    for t in house.TREES:
        (tmp_path / t).mkdir()
    (tmp_path / "loadgen" / "a.py").write_text("x = 1\n")
    assert house.main([], root=tmp_path) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("house {") and out[0].startswith("package")
