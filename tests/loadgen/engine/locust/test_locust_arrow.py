"""The Locust engine with output.records: arrow (issue 42): 2 local workers each write their
records.worker-K.arrow part, the merge writes one records.arrow (one record per request), the
live progress reads the parts a batch at a time, and the summary is that of the JSONL twin (the
same records exported). -m slow: Locust processes."""
from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("locust") is None:
    pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')",
                allow_module_level=True)

from analysis.contract import validate_run_dir
from loadgen.record import read_records
from tests.loadgen.engine.locust.test_locust import _check_exactly_once, _run, _scenario
from tests.loadgen.engine.procs.test_procs_arrow import same_summary, twin


class Seen:
    """A stand-in progress display: what the Follower handed it."""

    def __init__(self):
        self.done = []

    def start(self, *a):
        pass

    def stop(self):
        pass

    def on_send(self, row):
        pass

    def on_done(self, row):
        self.done.append(row.id)


@pytest.mark.slow
def test_two_workers_write_one_records_arrow(tmp_path, calib_server):
    p = _scenario(tmp_path, calib_server.url, {"mode": "concurrency", "concurrency": 4,
                                               "num_requests": 200},
                  output={"dir": str(tmp_path / "runs"), "run_name": "la", "report": "none",
                          "records": "arrow"})
    seen = Seen()
    res = _run(p, workers=2, progress=seen)
    d = res.run_dir
    assert (d / "records.arrow").is_file() and not (d / "records.jsonl").exists()
    assert sorted(p.name for p in (d / "locust").glob("records.worker-*")) == [
        "records.worker-0.arrow", "records.worker-1.arrow"]
    assert validate_run_dir(d) == []
    j = twin(d, tmp_path)
    recs = read_records(j / "records.jsonl")
    _check_exactly_once(recs, 200)
    assert {r["worker"] for r in recs} == {"0", "1"} and all(r["status"] == "ok" for r in recs)
    assert sorted(seen.done) == list(range(200))               # the live bar saw each once
    assert res.meta["records_written"] == 200
    same_summary(d, j)
