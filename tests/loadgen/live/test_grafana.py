"""docs/grafana/loadgen.json against what the exporter serves: every metric a query names is
served, and every served family is shown by some panel."""
import json
import re
import time
from pathlib import Path

from loadgen.live.metrics import FAMILIES
from loadgen.live.process import LiveExporter
from loadgen.targets.managed import free_port
from tests.loadgen.live.test_process import requests_total, scrape

DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana" / "loadgen.json"
NAME = re.compile(r"\bloadgen_[a-z_]+\b")


def exprs(node) -> list[str]:
    """Every PromQL string of the dashboard: panel targets and template variable queries."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("expr", "definition") and isinstance(v, str):
                out.append(v)
            elif k == "query" and isinstance(v, str):
                out.append(v)
            else:
                out += exprs(v)
    elif isinstance(node, list):
        for v in node:
            out += exprs(v)
    return out


def family(sample: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        if sample.endswith(suffix) and sample[: -len(suffix)] in FAMILIES:
            return sample[: -len(suffix)]
    return sample


def served(tmp_path) -> set[str]:
    """Sample names a real exporter serves after a completed and a failed record."""
    rec = {"id": 0, "status": "ok", "scheduled_at_ns": 0, "sent_at_ns": 1_000_000,
           "chunks": [[2_000_000, 1], [3_000_000, 1]], "first_token_at_ns": 2_000_000,
           "end_at_ns": 3_000_000, "output_tokens": 2}
    bad = {"id": 1, "status": "error", "error_kind": "http", "chunks": [], "output_tokens": 0}
    (tmp_path / "records.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(bad) + "\n")

    class Idle:
        sent = completed = failed = cancelled = tokens = 0
    with LiveExporter.open(free_port()) as live:
        live.follow(tmp_path, Idle())
        deadline = time.monotonic() + 60              # the follower's first poll: bounded
        while requests_total(s := scrape(live.url)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    return {name for name, _ in s}


def test_dashboard_queries_name_exactly_the_served_metrics(tmp_path):
    dash = json.loads(DASHBOARD.read_text())
    queried = {n for e in exprs(dash) for n in NAME.findall(e)}
    assert queried, "no PromQL in the dashboard"
    names = served(tmp_path)
    assert queried - names == set()                   # every queried series is served ...
    assert {family(n) for n in names} == set(FAMILIES)
    assert set(FAMILIES) - {family(n) for n in queried} == set()   # ... and each family shown


def test_each_latency_panel_shows_p50_and_p99():
    dash = json.loads(DASHBOARD.read_text())
    text = "\n".join(exprs(dash))
    for h in ("ttft", "itl", "tpot", "schedule_lag"):
        for q in ("0.5", "0.99"):
            assert f"histogram_quantile({q}, sum by (le) (rate(loadgen_{h}_seconds_bucket" in text
    assert "rate(loadgen_output_tokens_total" in text and "loadgen_in_flight" in text
    assert "sum by (status) (rate(loadgen_requests_total" in text
