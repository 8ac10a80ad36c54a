"""Multi-run directories (sweep, search, --repeat) are held by one process at a time
(loadgen/run/multilock.py): a second one gets one line naming the holder's pid and exit 2; the
lock of a process that died (kill -9 included) is taken over. Real processes, real flocks."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadgen import cli
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import ScenarioError

ROOT = Path(__file__).resolve().parents[3]
HOLD = ("import sys; from pathlib import Path; from loadgen.run.multilock import hold; "
        "hold(Path(sys.argv[1]), 'sweep'); print('held', flush=True); sys.stdin.readline()")


def _holder(d: Path) -> subprocess.Popen:
    """A real process holding ``d``; it says 'held' once it has the lock (no sleeps)."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(d)], cwd=ROOT, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = p.stdout.readline().strip()
    if line != "held":
        p.kill()
        p.wait()
        pytest.fail(f"the holder process did not take the lock: {line!r}")
    return p


def _sweep_yaml(tmp_path: Path) -> Path:
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({
        "name": "lk", "target": {"url": "http://127.0.0.1:9"}, "api": {"probe": False},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 3}},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 2},
        "sweep": {"param": "load.concurrency", "values": [1, 2]},
        "output": {"dir": str(tmp_path), "run_name": "sw", "report": "none"}}))
    return y


def test_a_second_sweep_into_a_held_directory_exits_2_naming_the_holder(tmp_path, capsys):
    d = tmp_path / "sw"
    p = _holder(d)
    try:
        code = cli.main(["sweep", str(_sweep_yaml(tmp_path))])
        err = capsys.readouterr().err.strip()
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    assert code == 2
    assert err.count("\n") == 0 and f"pid {p.pid}" in err and str(d) in err, err
    assert not (d / "concurrency-1").exists() and not (d / "sweep.json").exists()


def test_two_acquisitions_in_one_process_conflict_and_release_frees_it(tmp_path):
    from loadgen.run.multilock import hold, release
    d = tmp_path / "sw"
    fd = hold(d, "sweep")
    with pytest.raises(ScenarioError, match=rf"in use by another loadgen sweep \(pid {os.getpid()}\)"):
        hold(d, "sweep")
    release(fd)
    release(hold(d, "sweep"))


def test_the_lock_of_a_dead_process_is_taken_over(tmp_path):
    from loadgen.run.multilock import LOCK_NAME, hold, release
    d = tmp_path / "sw"
    p = _holder(d)
    p.kill()                                   # kill -9: no cleanup ran
    p.wait(timeout=30)
    assert str(p.pid) in (d / LOCK_NAME).read_text()      # the stale file is still there
    fd = hold(d, "sweep")
    assert (d / LOCK_NAME).read_text().split()[0] == str(os.getpid())
    release(fd)


def test_repeat_series_are_held_too(tmp_path):
    from loadgen.run.multilock import hold, release
    from loadgen.multirun.repeat import run_repeats, sweep_repeats
    tree = yaml.safe_load(_sweep_yaml(tmp_path).read_text())
    sc = scenario_from_dict(tree)
    ran = []
    fd = hold(tmp_path / "sw-x2", "sweep")
    try:
        with pytest.raises(ScenarioError, match="in use by another loadgen"):
            run_repeats(sc, 2, lambda one: ran.append(one))
        with pytest.raises(ScenarioError, match="in use by another loadgen"):
            sweep_repeats(sc, 2, lambda one: ran.append(one))
    finally:
        release(fd)
    assert ran == []
