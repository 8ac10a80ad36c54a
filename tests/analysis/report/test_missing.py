"""analysis/report/render.py: an absent figure is said with its reason, never "n/a: None"."""
from analysis.report.render import missing


def test_missing_says_why_or_what():
    assert missing("no idle baseline") == "n/a: no idle baseline"
    assert missing(None, "no idle baseline was measured") == "n/a (no idle baseline was measured)"
    assert missing("None") == "n/a (not measured)" and missing("") == "n/a (not measured)"
