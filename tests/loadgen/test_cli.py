"""The command line as a user meets it: subprocesses, exit codes, one-line errors."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import loadgen

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "loadgen.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def one_line_error(r, code=2):
    assert r.returncode == code, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("loadgen: error: "), r.stderr
    return lines[0]


def test_version_and_help():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"loadgen {loadgen.__version__}"
    h = cli("--help")
    assert h.returncode == 0
    from loadgen.cli import COMMANDS, build_parser
    build_parser()                    # every subcommand imports (no guard hides a broken one)
    for name in COMMANDS:
        assert f"    {name}" in h.stdout
    m = subprocess.run([sys.executable, "-m", "loadgen", "--version"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert m.stdout.strip() == f"loadgen {loadgen.__version__}"


@pytest.mark.skipif(shutil.which("loadgen", path=os.path.dirname(sys.executable)) is None,
                    reason="console script not installed (pip install -e .)")
def test_console_script():
    exe = shutil.which("loadgen", path=os.path.dirname(sys.executable))
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "loadgen" in r.stdout


def test_missing_scenario_file(tmp_path):
    line = one_line_error(cli("run", tmp_path / "nope.yaml"))
    assert "nope.yaml: no such scenario file" in line


def test_bad_scenario_names_the_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"target": {"url": "http://127.0.0.1:9"},
                                 "load": {"mode": "server", "rate": 0, "num_requests": 2}}))
    line = one_line_error(cli("run", p))
    assert line.endswith("load.rate: Input should be greater than 0")
    p.write_text("load: {mode: server\n")
    assert "not valid YAML" in one_line_error(cli("run", p))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_bad_override(tmp_path):
    p = ROOT / "scenarios" / "external.yaml"
    assert "load.num_requests" in one_line_error(cli("run", p, "--set", "load.num_requests=lots"))
    assert "--set load.rate: expected key.path=value" in one_line_error(
        cli("run", p, "--set", "load.rate"))
    assert one_line_error(cli("run", p, "--workers", "2")).endswith(
        "--workers needs --engine locust")


def test_unreachable_target_is_a_user_error(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"target": {"url": "http://127.0.0.1:9"},
                                 "api": {"connect_timeout_s": 2, "ready_timeout_s": 0},
                                 "load": {"mode": "server", "rate": 1, "num_requests": 1},
                                 "output": {"dir": str(tmp_path)}}))
    line = one_line_error(cli("run", p))
    assert line == ("loadgen: error: target.url: cannot reach http://127.0.0.1:9/v1/models: "
                    "connection refused (nothing listens there)")
    # api.model given: before, every request was sent, "failed 1" printed and exit 0
    line = one_line_error(cli("run", p, "--set", "api.model=m"))
    assert "cannot reach http://127.0.0.1:9/v1/models" in line


def calib_scenario(tmp_path, url, calib=None, **api):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "target": {"url": url}, "api": {"extra_body": {"calib": calib or {}}, **api},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 3}},
        "load": {"mode": "offline", "num_requests": 3, "concurrency": 1},
        "output": {"dir": str(tmp_path), "report": "none"}}))
    return p


def test_wrong_model_name_is_a_user_error(calib_server, tmp_path):
    line = one_line_error(cli("run", calib_scenario(tmp_path, calib_server.url, model="tiny")))
    assert line == (f"loadgen: error: api.model: 'tiny' is not served by {calib_server.url} "
                    f"({calib_server.url}/v1/models lists 'calib-model')")


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_rejected_field_in_strict_mode_is_a_user_error(tmp_path):
    from tests.loadgen.client.fakes import FakeOpenAI
    with FakeOpenAI(reject=("ignore_eos",), models=("calib-model",)) as srv:
        p = calib_scenario(tmp_path, srv.url, drop_rejected_fields=False)
        line = one_line_error(cli("run", p))
        assert line.startswith(f"loadgen: error: api: {srv.url} rejects ignore_eos (HTTP 400: "
                               "Unexpected fields in the request: {'ignore_eos'})")
        r = cli("run", p, "--set", "api.drop_rejected_fields=true", "--set",
                "output.run_name=dropped")
    assert r.returncode == 0, r.stderr
    assert "rejected ignore_eos" in r.stdout and "dropped from every request" in r.stdout
    summary = json.loads((tmp_path / "dropped" / "summary.json").read_text())
    assert summary["dropped_fields"] == ["ignore_eos"] and summary["requests_completed"] == 3


def test_a_run_where_every_request_failed_exits_3_and_says_why(calib_server, tmp_path):
    p = calib_scenario(tmp_path, calib_server.url, {"fault": "http500"})
    r = cli("run", p, "--json")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert json.loads(r.stdout.strip().splitlines()[-1])["summary"]["requests_failed"] == 3
    err = r.stderr.strip().splitlines()
    assert "loadgen: warning: the probe request" in err[0] and "HTTP 500" in err[0]
    assert err[1] == "loadgen: every measured request failed (3 of 3); most common causes:"
    assert err[2].startswith("loadgen:   http x3: HTTP 500: ") and "calibration http500" in err[2]
    assert "Traceback" not in r.stderr


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_fail_on_invalid_exit_codes(calib_server, tmp_path):
    p = calib_scenario(tmp_path, calib_server.url, {"ttft_ms": 20})
    ok = cli("run", p, "--json", "--fail-on-invalid", "--set", "output.run_name=valid")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["summary"]["verdict"]["valid"] is True
    slo = ["--set", "slo.ttft_ms=1", "--set", "output.run_name=invalid"]
    assert cli("run", p, "--json", *slo).returncode == 0            # INVALID, not asked to fail
    slo[-1] = "output.run_name=invalid2"
    bad = cli("run", p, "--json", "--fail-on-invalid", *slo)
    assert bad.returncode == 1, bad.stderr
    assert json.loads(bad.stdout.strip().splitlines()[-1])["summary"]["verdict"]["valid"] is False


def test_server_that_fails_to_start(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "target": {"server": {"kind": "command", "command": [
            sys.executable, "-c", "import sys; print('weights missing'); sys.exit(4)"]}},
        "load": {"mode": "server", "rate": 1, "num_requests": 1},
        "output": {"dir": str(tmp_path), "run_name": "r"}}))
    r = cli("run", p)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("loadgen: error: target.server: server exited with code 4")
    assert "weights missing" in r.stderr
    assert (tmp_path / "r" / "server.log").read_text().strip() == "weights missing"


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_run_json_and_report(calib_server, tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "target": {"url": calib_server.url},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 3}},
        "load": {"mode": "offline", "num_requests": 5},
        "output": {"dir": str(tmp_path), "run_name": "r", "report": "none"}}))
    r = cli("run", p, "--json", "--set", "load.concurrency=2")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["summary"]["requests_completed"] == 5 and out["interrupted"] is False
    d = Path(out["run_dir"])
    assert yaml.safe_load((d / "scenario.yaml").read_text())["load"]["concurrency"] == 2
    (d / "summary.json").unlink()
    rr = cli("report", d, "--no-plots")
    assert rr.returncode == 0, rr.stderr
    assert json.loads((d / "summary.json").read_text())["requests_completed"] == 5
    assert (d / "report.md").is_file()
    line = one_line_error(cli("report", tmp_path))
    assert "not a run or sweep directory" in line
