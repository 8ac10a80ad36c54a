"""bench.soak: its /proc reading and its 20 %→95 % growth rule (byte-fed), and one small run
(-m slow: a real `loadgen run` of 2,000 requests)."""
import json
import os

import pytest

from bench import soak


def test_rss_of_a_proc_status_text():
    assert soak.rss_kb(b"Name:\tpython\nVmPeak:\t 9 kB\nVmRSS:\t  123456 kB\n") == 123456
    assert soak.rss_kb(b"Name:\tzombie\n") == 0


def test_this_process_and_its_tree():
    own, whole = soak.sample_rss(os.getpid())
    assert 0 < own <= whole


def test_growth_between_20_and_95_percent_of_the_records_written():
    # (t, rss kB, tree rss kB, record bytes): 1,000 bytes in all
    samples = [(0, 0, 50_000, 0), (1, 0, 100 * 1024, 150), (2, 0, 101 * 1024, 200),
               (3, 0, 110 * 1024, 960), (4, 0, 400 * 1024, 1000)]
    g = soak.growth(samples)
    assert (g["rss_lo_mb"], g["rss_hi_mb"], g["growth_mb"]) == (101.0, 110.0, 9.0)
    assert soak.growth([(0, 0, 1, 0)])["growth_mb"] is None


def test_record_bytes_counts_part_files_while_there_are_any(tmp_path):
    run = tmp_path / "runs" / "r1"
    (run / "procs").mkdir(parents=True)
    (run / "records.jsonl").write_bytes(b"x" * 5)
    assert soak.record_bytes(tmp_path / "runs") == 5
    (run / "procs" / "records.0.jsonl").write_bytes(b"x" * 7)
    (run / "procs" / "records.1.jsonl").write_bytes(b"x" * 3)
    assert soak.record_bytes(tmp_path / "runs") == 10


@pytest.mark.slow
def test_a_small_soak_run(capsys):
    assert soak.main(["--requests", "2000", "--quiet", "--every", "0.05"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["requests"] == 2000 and out["open_run"]["rows"] == 2000
    assert out["run"]["peak_mb"] > 0 and out["bytes_per_record"] > 0
