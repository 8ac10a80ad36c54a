"""The roofline for every run of a managed server: this host's rates, measured once and cached.

    run ended, managed server on this host (stopped) ─► ensure_host_calibration(run_dir)
        sut.json model shape present? device spec already found (catalogue, spec file, a cached
        calibration of this host)? ─► nothing to do
        else ─► analysis.roofline.calibrate.calibrate(device, fp32, short) ─► DeviceSpec
             (evidence measured, host, date) ─► ~/.cache/loadgen/calibration.json
    ─► meta.json "calibration": {"status": ran | cached | skipped | failed, "reason", "seconds"}
    ─► the report's roofline section and the console's roofline line use it

It runs after the measured window and after the server stopped, so it never competes with the
measurement; ``LOADGEN_NO_CALIBRATION=1`` skips it (the roofline is then "no device spec").
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from analysis.report.conditions import CALIBRATION, device_spec, model_shape, server_info

COPY_BYTES = 128 * 2**20       # a short run: ~10 s on a 2-core VM
REPEATS = 5


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def ensure_host_calibration(run_dir: Path, calibration: Path = CALIBRATION) -> dict:
    """Calibrate this host when the run's roofline would otherwise lack a device spec."""
    if os.environ.get("LOADGEN_NO_CALIBRATION"):
        return {"status": "skipped", "reason": "LOADGEN_NO_CALIBRATION is set"}
    meta, sut = _read(run_dir / "meta.json"), _read(run_dir / "sut.json")
    if model_shape(sut) is None:
        return {"status": "skipped", "reason": "the server published no model shape"}
    spec, how = device_spec(meta, sut, calibration)
    if spec is not None:
        return {"status": "cached", "reason": how}
    from analysis.roofline import calibrate as cal
    from analysis.roofline import devices
    device = "cpu" if server_info(sut).get("backend") == "cpu" else "auto"
    t0 = time.monotonic()
    try:
        spec = cal.calibrate(device, COPY_BYTES, None, REPEATS, ("fp32",), log=lambda *_: None)
        devices.save_spec(spec, calibration.expanduser())
    except Exception as e:      # a failed calibration leaves the roofline "no device spec"
        return {"status": "failed", "reason": f"{type(e).__name__}: {e}"}
    return {"status": "ran", "reason": f"no device spec for this host; saved {calibration}",
            "seconds": round(time.monotonic() - t0, 1), "device": device}
