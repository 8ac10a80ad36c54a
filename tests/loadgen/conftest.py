"""Fixtures for loadgen tests: a calibration server shared by the whole session.

``calib_server`` is a ``servers.calib.CalibrationServer`` (subprocess on
127.0.0.1, zero default delays); tests pick timings and faults per request through the
``calib`` object of the request body, so one server serves every test.
"""
import pytest

from servers.calib import CalibrationServer


@pytest.fixture(scope="session")
def calib_server():
    with CalibrationServer() as server:
        yield server
