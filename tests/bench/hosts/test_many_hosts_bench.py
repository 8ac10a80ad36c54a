"""bench.many_hosts on two simulated hosts, small: every record found on its own worker's veth
capture (TTFT client vs wire, each on its own clock), the clock offsets placed and within their
stated uncertainty of the true (namespace) offsets. How close the TTFT is: the bench prints it
(bench/results), no test asserts a timing."""
from __future__ import annotations

import json
import shutil

import pytest

from bench import many_hosts


@pytest.mark.slow
def test_bench_two_hosts_matches_capture_and_true_offsets(locust_ok, capsys):
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump is not installed")
    pytest.importorskip("dpkt")
    assert many_hosts.main(["--ks", "2", "--requests", "6", "--streams", "2"]) == 0
    out = capsys.readouterr().out
    row = json.loads(out.strip().splitlines()[-1])["rows"][0]
    assert row["k"] == 2 and row["rc"] == 0 and row["ok"] == 12
    assert row["matched"] == 12 and row["ttft_err_ms"]["n"] == 12     # each on its veth
    assert row["methods"] == ["ping_pong"] and row["unplaced"] == []
    assert row["clock_true_error_ms_max"] <= row["clock_uncertainty_ms_max"]
    assert row["netem"]["applied"] != bool(row["netem"]["why"])
    assert "TTFT err ms mean" in out
