"""``loadgen run --metrics-port P`` as a user meets it: served during the run, one-line errors,
the port free once the run ended (interrupt included)."""
import json
import os
import socket
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest
import yaml

from loadgen.live.flags import parse_port
from loadgen.scenario.model import ScenarioError
from loadgen.targets.managed import free_port
from tests.loadgen.live.test_process import port_is_free, requests_total, scrape, scrape_until
from tests.support.procs import interrupt, reaped

ROOT = Path(__file__).resolve().parents[3]


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "loadgen.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def one_line_error(r, code=2) -> str:
    assert r.returncode == code, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("loadgen: error: "), r.stderr
    return lines[0]


def scenario(tmp_path, url, load) -> Path:
    sc = {"name": "live", "target": {"url": url},
          "api": {"extra_body": {"calib": {"ttft_ms": 20, "itl_ms": 10}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": load, "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def listeners(port: int) -> list[str]:
    """Local addresses listening on ``port`` (Linux /proc/net/tcp{,6}: state 0A = LISTEN)."""
    out = []
    for name in ("tcp", "tcp6"):
        try:
            rows = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            addr, p = local.split(":")
            if state == "0A" and int(p, 16) == port:
                out.append(socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr)[::-1])
                           if name == "tcp" else addr)
    return out


@pytest.mark.parametrize("bad", ["0", "65536", "-1", "http", "80.5", " ", "٣"])
def test_a_port_that_is_not_a_port_number(bad):
    with pytest.raises(ScenarioError, match="--metrics-port"):
        parse_port(bad)
    assert parse_port("9464") == 9464


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_flag_errors_are_one_line_naming_the_flag(tmp_path):
    path = scenario(tmp_path, "http://127.0.0.1:9", {"mode": "concurrency", "concurrency": 1,
                                                       "num_requests": 1})
    assert "--metrics-port abc" in one_line_error(cli("run", path, "--metrics-port", "abc"))
    assert "--metrics-host" in one_line_error(cli("run", path, "--metrics-host", "0.0.0.0"))
    line = one_line_error(cli("run", path, "--metrics-port", free_port(), "--engine", "locust",
                              "--worker", "--master-host", "127.0.0.1"))
    assert "--metrics-port" in line and "not to --worker" in line
    line = one_line_error(cli("run", path, "--metrics-port", free_port(), "--metrics-host",
                              "192.0.2.1"))                 # not this host's: cannot bind
    assert "--metrics-port" in line and "192.0.2.1" in line
    with socket.socket() as taken:                      # someone else listens there
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = one_line_error(cli("run", path, "--metrics-port", port))
        assert f"--metrics-port {port}" in line and "in use" in line
    assert not (tmp_path / "run").exists()              # refused before anything ran


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_served_during_a_cli_run_and_freed_when_it_is_interrupted(calib_server, tmp_path):
    path = scenario(tmp_path, calib_server.url,
                    {"mode": "concurrency", "concurrency": 2, "duration_s": 600})
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loadgen.cli", "run", str(path), "--json",
                             "--metrics-port", str(port)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    with reaped(proc):
        seen = scrape_until(url, timeout_s=120, alive=lambda: proc.poll() is None)
        assert seen is not None, "no record counted on /metrics while the run went"
        assert seen[("loadgen_output_tokens_total", ())] > 0
        assert listeners(port) == ["127.0.0.1"]          # loopback only, by default
        out, err = interrupt(proc, 120)
    assert proc.returncode == 130, err
    run_dir = Path(json.loads(out.strip().splitlines()[-1])["run_dir"])
    recs = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(recs) >= requests_total(seen)           # what was served had been written
    assert port_is_free(port)
    with pytest.raises((OSError, urllib.error.URLError)):
        scrape(url)
    assert not [n for n in os.listdir(run_dir) if "live" in n]   # nothing of ours in the run


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_repeat_series_is_served_by_one_exporter_and_the_port_freed_at_its_end(calib_server,
                                                                                tmp_path):
    path = scenario(tmp_path, calib_server.url,
                    {"mode": "concurrency", "concurrency": 1, "num_requests": 2})
    port = free_port()
    r = cli("run", path, "--metrics-port", port, "--repeat", "2", "--json", timeout=240)
    assert r.returncode == 0, r.stderr
    parent = Path(json.loads(r.stdout.strip().splitlines()[-1])["repeat_dir"])
    assert all((parent / f"run-{k}" / "summary.json").is_file() for k in (1, 2))
    assert port_is_free(port)
