"""loadgen.engine.core.partition: every id once, shares balanced, arrival times kept."""
import numpy as np
import pytest

from loadgen.engine.core import partition as part


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_round_robin_shares_hold_every_item_once_with_its_time(n):
    offsets = np.sort(np.random.default_rng(1).exponential(1e7, 101).cumsum()).astype(int)
    items = list(zip(range(101), offsets))
    shares = [part.share(items, k, n) for k in range(n)]
    assert sorted(x for s in shares for x in s) == items          # every id once, same time
    assert max(map(len, shares)) - min(map(len, shares)) <= 1     # balanced
    for s in shares:                                              # each share in time order
        assert [t for _, t in s] == sorted(t for _, t in s)
    # each share spans the whole schedule (an even share of the arrival times, not a block)
    assert all(s[-1][1] >= offsets[-n] for s in shares)


def test_split_sums_to_the_total_and_keeps_none():
    for total in (0, 1, 5, 10, 1023):
        for n in (1, 2, 3, 8):
            parts = [part.split(total, k, n) for k in range(n)]
            assert sum(parts) == total and max(parts) - min(parts) <= 1
    assert part.split(None, 0, 2) is None


def test_closed_ids_interleave_without_gaps_and_owed_ids_match():
    n, first = 3, 5
    ids = [[next(g) for _ in range(4)] for g in (part.closed_ids(first, k, n) for k in range(n))]
    assert sorted(i for s in ids for i in s) == list(range(first, first + 12))
    assert part.owed_closed(first, 1, n, 4) == ids[1]


def test_stage_share_splits_each_stage():
    stages = [{"start_s": 0, "duration_s": 1, "concurrency": 5},
              {"start_s": 1, "duration_s": 1, "concurrency": 1}]
    shares = [part.stage_share(stages, k, 2) for k in range(2)]
    assert [s[0]["concurrency"] for s in shares] == [3, 2]
    assert [s[1]["concurrency"] for s in shares] == [1, 0]
    assert all(s[0]["duration_s"] == 1 for s in shares)


def test_processes_for_auto_caps_and_sessions():
    assert part.processes_for("auto", None, None, False, cpus=8) == 7
    assert part.processes_for("auto", None, None, False, cpus=1) == 1
    assert part.processes_for("auto", 3, None, False, cpus=8) == 3    # each needs a user
    said = []
    assert part.processes_for(4, None, 2, False, cpus=8, warn=said.append) == 2
    assert "4 asked, 2 started" in said[0]
    assert part.processes_for(4, None, None, True, cpus=8) == 1       # sessions: one process
    assert part.planned_count(True, None, None, 5.0) is None
    assert part.planned_count(False, 12, None, 1.0) == 12
