"""loadgen/live/process.py + exporter.py: a real run against the calibration server, scraped.

The exporter is opened by the test (as ``loadgen run`` opens it), a real run goes through
flags.run_live, a thread scrapes /metrics meanwhile; after the run, still served, the counts
must equal the records written; after close() the port is free.
"""
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from loadgen.live.flags import run_live
from loadgen.live.process import LiveExporter
from loadgen.console.progress import RunProgress
from loadgen.scenario.loader import load_scenario
from loadgen.targets.managed import free_port

DEADLINE_S = 60.0           # bounds on polling only: nothing below asserts a duration


def scrape(url: str) -> dict:
    """{(sample name, frozen labels): value} of one GET /metrics."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def requests_total(samples: dict) -> float:
    return sum(v for (name, _), v in samples.items() if name == "loadgen_requests_total")


def scrape_until(url: str, want: float = 1, timeout_s: float = DEADLINE_S, alive=None,
                 every_s: float = 0.05):
    """Scrape ``url`` until ``loadgen_requests_total`` reaches ``want`` (bounded by ``timeout_s``,
    and by ``alive()`` turning false): those samples, else None. Values are never timed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (alive is None or alive()):
        try:
            s = scrape(url)
        except (OSError, urllib.error.URLError):
            s = None
        if s is not None and requests_total(s) >= want:
            return s
        time.sleep(every_s)
    return None


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def scenario(tmp_path, url, n=30, processes=1, **load):
    sc = {"name": "live", "target": {"url": url},
          "api": {"extra_body": {"calib": {"ttft_ms": 5, "itl_ms": 3}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": {"mode": "concurrency", "concurrency": 2, "num_requests": n,
                   "warmup_requests": 2, **load},
          "client": {"processes": processes},
          "output": {"dir": str(tmp_path / "runs"), "report": "none"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("processes", [1, 2])    # 2: the senders' parts, then the merged file
def test_a_real_run_is_served_live_and_its_counts_end_equal_to_its_records(calib_server,
                                                                         tmp_path, processes):
    sc = load_scenario(str(scenario(tmp_path, calib_server.url, processes=processes)), [])
    port = free_port()
    live = LiveExporter.open(port)
    seen, stop = [], threading.Event()

    def poll():                     # until a record is counted (or the run is over)
        while not stop.is_set():
            try:
                s = scrape(live.url)
            except (OSError, urllib.error.URLError):
                time.sleep(0.02)
                continue
            seen.append(s)
            if requests_total(s) > 0:
                return
            time.sleep(0.02)
    t = threading.Thread(target=poll, daemon=True)
    try:
        t.start()
        res = run_live(live, sc, RunProgress(None, enabled=False))
        stop.set()
        t.join(10)
        assert seen, "no scrape answered while the run went"
        recs = [json.loads(x) for x in (res.run_dir / "records.jsonl").read_text().splitlines()]
        assert len(recs) == 32 and all(r["status"] == "ok" for r in recs)
        deadline = time.monotonic() + DEADLINE_S          # the exporter catches up: bounded
        while True:
            end = scrape(live.url)
            # the records followed, and the in-flight gauge's next copy of the progress counters
            # (every feed.MIRROR_S) taken after the last request ended
            caught_up = requests_total(end) == len(recs) and end.get(("loadgen_in_flight", ())) == 0
            if caught_up or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert end[("loadgen_requests_total", (("status", "ok"),))] == len(recs)
        assert end[("loadgen_requests_total", (("status", "error"),))] == 0
        assert end[("loadgen_output_tokens_total", ())] == sum(r["output_tokens"] for r in recs)
        assert end[("loadgen_ttft_seconds_count", ())] == len(recs)
        assert end[("loadgen_tpot_seconds_count", ())] == sum(r["output_tokens"] > 1 for r in recs)
        assert end[("loadgen_itl_seconds_count", ())] == sum(
            sum(n for _, n in r["chunks"] if n) - 1 for r in recs)   # one chunk per token here
        assert end[("loadgen_schedule_lag_seconds_count", ())] == len(recs)
        assert end[("loadgen_in_flight", ())] == 0
        assert ("loadgen_ttft_seconds_created", ()) not in end     # only the families listed
        assert res.summary["requests_completed"] == 30             # the run itself as ever
        assert not port_is_free(port)
    finally:
        live.close()
    assert port_is_free(port)
    assert not live.mirror.dir.exists()
    try:
        urllib.request.urlopen(live.url, timeout=5)
        raise AssertionError("still served after close()")
    except (OSError, urllib.error.URLError):
        pass


def test_only_metrics_is_served_and_a_repeat_keeps_counting(calib_server, tmp_path):
    """Two runs through one exporter (--repeat): the counters go on from the first run's."""
    sc = load_scenario(str(scenario(tmp_path, calib_server.url, n=3, concurrency=1)), [])
    with LiveExporter.open(free_port()) as live:
        try:
            urllib.request.urlopen(live.url.replace("/metrics", "/"), timeout=5)
            raise AssertionError("/ answered")
        except urllib.error.HTTPError as e:
            assert e.code == 404
        dirs = []
        for k in (1, 2):
            one = sc.model_copy(update={"output": sc.output.model_copy(
                update={"run_name": f"run-{k}"})})
            dirs.append(run_live(live, one, RunProgress(None, enabled=False)).run_dir)
        total = sum(len((d / "records.jsonl").read_text().splitlines()) for d in dirs)
        assert total == 10
        deadline = time.monotonic() + DEADLINE_S
        while requests_total(scrape(live.url)) != total and time.monotonic() < deadline:
            time.sleep(0.05)
        assert requests_total(scrape(live.url)) == total
