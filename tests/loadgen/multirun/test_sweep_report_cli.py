"""``loadgen sweep`` ends with the sweep report in the sweep directory (or the command that
writes it), and ``--fail-on-invalid`` exits 1 when a point is INVALID, as on ``loadgen run``
(#38). One tiny sweep against the calibration server, rerun with its points reused."""
import json

import yaml

from loadgen import cli
from tests.loadgen.multirun.test_sweep import base


def test_sweep_writes_its_report_and_fails_on_invalid_when_asked(calib_server, tmp_path, capsys):
    tree = base(tmp_path, {"mode": "concurrency", "concurrency": 1, "num_requests": 2},
                {"param": "load.concurrency", "values": [1, 2]}, url=calib_server.url,
                calib={"ttft_ms": 5})
    tree["api"]["probe"] = False
    tree["output"]["report"] = "text"
    tree["slo"] = {"ttft_ms": 0.01}                # no request can meet it: every point INVALID
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump(tree))
    d = tmp_path / "sweep-sw"
    assert cli.main(["sweep", str(y)]) == 0       # INVALID points, no flag: exit 0, as run does
    out = capsys.readouterr().out
    assert (d / "report.md").is_file() and (d / "report.html").is_file()
    assert f"sweep report: {d / 'report.html'}" in out
    sw = json.loads((d / "sweep.json").read_text())
    assert sw["complete"] is True and sw["plan"]["values"] == [1, 2]
    assert cli.main(["sweep", str(y), "--fail-on-invalid"]) == 1     # reused points
    err = capsys.readouterr().err
    assert "--fail-on-invalid: 2 of 2 points INVALID (concurrency-1, concurrency-2)" in err
    assert cli.main(["sweep", str(y), "--set", "output.report=none", "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["report"] is None and line["report_command"] == f"loadgen report {d}"
