"""Simulated hosts need root and Linux namespaces (bench/hosts/netns.py): where this process
cannot make them, every test here skips and says why (never fails)."""
import importlib.util

import pytest

from bench.hosts import netns


@pytest.fixture
def hosts_ok():
    why = netns.unavailable()
    if why:
        pytest.skip(why)


@pytest.fixture
def locust_ok(hosts_ok):
    if importlib.util.find_spec("locust") is None:
        pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')")
