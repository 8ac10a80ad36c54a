"""A calibration server for the contract's run-directory tests (a subprocess on 127.0.0.1)."""
import pytest

from servers.calib import CalibrationServer


@pytest.fixture(scope="module")
def calib_server():
    with CalibrationServer() as server:
        yield server
