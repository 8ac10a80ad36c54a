"""``loadgen sweep --metrics-port P``: one exporter follows every point's run; one-line errors."""
import json

import pytest
import yaml

from loadgen.live.process import LiveExporter
from loadgen.multirun.sweep import run_sweep
from loadgen.scenario.loader import scenario_from_dict
from loadgen.targets.managed import free_port
from tests.loadgen.live.test_flags import cli, one_line_error
from tests.loadgen.live.test_process import port_is_free, requests_total, scrape_until


def tree(tmp_path, url) -> dict:
    return {"name": "live-sweep", "target": {"url": url, "scrape_metrics": False},
            "api": {"extra_body": {"calib": {"ttft_ms": 5, "itl_ms": 2}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 4}},
            "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 3},
            "sweep": {"param": "load.concurrency", "values": [1, 2]},
            "output": {"dir": str(tmp_path), "run_name": "sw", "report": "none"}}


def test_one_exporter_counts_every_point_of_the_sweep(calib_server, tmp_path):
    port = free_port()
    ex = LiveExporter.open(port)
    try:
        d, result = run_sweep(scenario_from_dict(tree(tmp_path, calib_server.url)), exporter=ex)
        lines = sum(len((d / p["run_dir"] / "records.jsonl").read_text().splitlines())
                    for p in result["points"])
        assert len(result["points"]) == 2 and lines >= 6
        s = scrape_until(ex.url, lines) or {}
        assert requests_total(s) == lines          # both points' records, each once
        assert s[("loadgen_requests_total", (("status", "ok"),))] == lines
        assert s[("loadgen_output_tokens_total", ())] == 4 * lines
    finally:
        ex.close()
    assert port_is_free(port)


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_the_cli_serves_a_sweep_and_frees_the_port(calib_server, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tree(tmp_path, calib_server.url)))
    port = free_port()
    r = cli("sweep", path, "--metrics-port", port, "--json", timeout=240)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout.strip().splitlines()[-1])["points"]) == 2
    assert port_is_free(port)
    assert "--metrics-port abc" in one_line_error(cli("sweep", path, "--metrics-port", "abc"))
    assert "--metrics-host" in one_line_error(cli("sweep", path, "--metrics-host", "127.0.0.1"))
