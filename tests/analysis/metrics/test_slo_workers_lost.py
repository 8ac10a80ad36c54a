"""A Locust worker lost mid-run (dead or never ready) makes the verdict INVALID and names it
(issue 32); a run whose workers all finished gets no such check."""
from analysis.metrics import slo
from tests.analysis.synth import server_meta, steady


def test_a_lost_worker_is_a_named_reason():
    meta = server_meta()
    meta["locust"] = {"worker_status": {"0": "done", "1": "dead", "2": "never_ready"}}
    v = slo.verdict(steady(40), meta)
    assert not v["valid"]
    (why,) = [r for r in v["reasons"] if "lost" in r]
    assert "worker 1 dead" in why and "worker 2 never ready" in why
    assert {c["name"]: c["value"] for c in v["checks"]}["workers_lost"] == ["1", "2"]


def test_workers_that_all_finished_add_no_check():
    meta = server_meta()
    meta["locust"] = {"worker_status": {"0": "done", "1": "done"}}
    v = slo.verdict(steady(40), meta)
    assert v["valid"] and "workers_lost" not in {c["name"] for c in v["checks"]}
