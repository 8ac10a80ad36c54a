"""The device spec of every run, frozen into its directory (device.json) when the run ends.

    run ended ─► freeze_device(run_dir, may_calibrate)
        analysis.roofline.run_device.resolve(meta, sut, cache): a spec file named in meta, the
        catalogue entry of the server's device, or this host's cached calibration
        none (or the cached one was taken on a busy host, or its memory bandwidth is > 40 % off a
        0.1 s spot check taken now: a VM's neighbours move it), a managed server that stopped, a model
        shape in sut.json ─► analysis.roofline.calibrate.calibrate(device, fp32, short; re-measured
             once on a busy host, else labelled) ─► ~/.cache/loadgen/calibration.json
        ─► RUN/device.json (run_device.record: the spec, its evidence, how it was chosen, when, where;
           ``calibration``: which cached calibration it was — path, version, saved when and by
           which pid, the host's load then — or that this run took it)
    The cache is shared by every process on the host: the decision and any calibration happen
    under its lock (analysis.roofline.calib_cache: fcntl, bounded wait), saves are versioned and
    atomic (temp file + os.replace), so runs ending together take turns instead of calibrating
    on each other's load or reading a half-written file.
    ─► meta.json "calibration": {"status": ran | cached | skipped | failed, "reason", "seconds"}
    ─► summary.json "roofline" (analysis.roofline.run_roofline reads device.json, never the cache)

The calibration runs after the measured window and after the server stopped, so it never competes
with the measurement; ``LOADGEN_NO_CALIBRATION=1`` skips it (a cached or catalogue spec is still
frozen). A run whose device.json says "none" keeps that: a later `loadgen report` does not look
again (``--device`` recomputes against a spec you name).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from analysis.contract.rundir import read_json
from analysis.roofline import calib_cache, run_device
from analysis.roofline.calibrate import DEFAULT_PATH
from analysis.roofline.model_spec import shape_in_sut

CALIBRATION = DEFAULT_PATH     # where `loadgen calibrate` saves (and this module caches)
COPY_BYTES = 128 * 2**20       # a short run: ~10 s on a 2-core VM
REPEATS = 5
DRIFT = 0.4                    # a spot check this far off the cached bandwidth: calibrate again


def _read(path: Path) -> dict:
    """A run file as written, through analysis.contract ({} when absent or not JSON)."""
    return read_json(path) or {}


def _busy(spec) -> bool:
    return bool(spec is not None and (spec.meta.get("host_load") or {}).get("busy"))


def spot_bandwidth() -> float:
    """This host's numpy read bandwidth now (B/s): the calibration's own numpy read probe, 3
    repeats (~0.1 s); compared with that probe's figure (calibrate.numpy_read)."""
    from analysis.roofline import calibrate as cal
    return cal.measure_read("numpy", COPY_BYTES, 3, budget_s=5.0)["bytes_per_s"]


def _drift(spec) -> str | None:
    """Why a cached (quiet) calibration no longer describes this host, or None: its memory
    bandwidth and a spot check taken now differ by more than DRIFT (a VM's neighbours move it;
    seen here: 11.9 GB/s cached at 18:00, 22.8 GB/s at 21:10), or it was saved before the read
    probe (its bandwidth a copy's, below what weight reads get: no bound)."""
    from analysis.roofline import calibrate as cal
    if cal.copy_only(spec):
        return (f"the cached calibration ({spec.meta.get('date')}) predates the read-bandwidth "
                "probe: its memory bandwidth is a copy's")
    try:
        now = spot_bandwidth()
    except Exception:          # no spot check: the cached spec stands, as before
        return None
    then = cal.numpy_read(spec)
    if not then or abs(now - then) <= DRIFT * then:
        return None
    return (f"the cached calibration's memory bandwidth ({then / 1e9:.1f} GB/s, "
            f"{spec.meta.get('date')}) is {abs(now - then) / then:.0%} off a spot check now "
            f"({now / 1e9:.1f} GB/s)")


def _calibrate(sut: dict, calibration: Path, cached, why: str | None = None):
    """(spec, status dict, fresh?): a new calibration, saved when it beats what the cache holds."""
    from analysis.roofline import calibrate as cal
    device = "cpu" if run_device.server_info(sut).get("backend") == "cpu" else "auto"
    t0 = time.monotonic()
    try:
        spec = cal.calibrate(device, COPY_BYTES, None, REPEATS, ("fp32",))
    except Exception as e:      # a failed calibration keeps what there was (or none)
        return cached, {"status": "failed", "reason": f"{type(e).__name__}: {e}"}, False
    why = why or ("the cached calibration was taken on a busy host" if cached is not None
                  else "no device spec for this host")
    status = {"status": "ran", "reason": f"{why}; saved {calibration}",
              "seconds": round(time.monotonic() - t0, 1), "device": device,
              "evidence": spec.meta.get("evidence")}
    if cached is not None and _busy(spec) and cached.bandwidth() >= spec.bandwidth():
        status["reason"] = f"{why}; busy again, the cached one kept (higher bandwidth)"
        return cached, status, False   # both busy: the faster one is nearer the truth
    calib_cache.save(spec, calibration, locked=True)     # freeze_device holds the lock
    return spec, status, True


def freeze_device(run_dir: Path, may_calibrate: bool, calibration: Path = CALIBRATION) -> dict:
    """Write run_dir/device.json; calibrate first when allowed and needed, holding the cache's
    lock (another process's calibration is waited for, then found cached). Returns meta.json's
    "calibration" object."""
    if not may_calibrate or os.environ.get("LOADGEN_NO_CALIBRATION"):
        return _freeze(Path(run_dir), may_calibrate, calibration)   # reads only: saves are atomic
    try:
        with calib_cache.lock(calibration, timeout_s=calib_cache.LOCK_WAIT_S):
            return _freeze(Path(run_dir), may_calibrate, calibration)
    except (calib_cache.CacheBusy, OSError) as e:   # no lock (held too long, read-only home)
        status = _freeze(Path(run_dir), False, calibration)
        status["lock"] = f"not calibrated: the cache's lock was not taken ({e})"
        return status


def _freeze(run_dir: Path, may_calibrate: bool, calibration: Path) -> dict:
    meta, sut = _read(run_dir / "meta.json"), _read(run_dir / "sut.json")
    spec, how = run_device.resolve(meta, sut, calibration)
    status = {"status": "cached", "reason": how} if spec is not None else \
        {"status": "skipped", "reason": how}
    local = spec is not None and how.startswith("local calibration")
    why_not = ("LOADGEN_NO_CALIBRATION is set" if os.environ.get("LOADGEN_NO_CALIBRATION")
               else "no managed server of this run stopped on this host" if not may_calibrate
               else "the server published no model shape" if shape_in_sut(sut) is None
               else None)
    drifted = _drift(spec) if local and not _busy(spec) and why_not is None else None
    fresh = False
    if spec is None or (local and _busy(spec)) or drifted:
        if why_not is None:
            spec, status, fresh = _calibrate(sut, calibration, spec, drifted)
            if fresh:
                how = (f"calibrated on {spec.meta.get('host')} at {spec.meta.get('date')}, after "
                       f"this run's server stopped (saved {calibration})")
        elif spec is None:
            status = {"status": "skipped", "reason": f"{how}; not calibrated: {why_not}"}
    run_device.write(run_dir, run_device.record(spec, how, calib_cache.provenance(spec, fresh)
                                        if spec is not None else None))
    return status


def refreeze_after_shared_server(run_dirs, calibration: Path = CALIBRATION) -> list[Path]:
    """A sweep's points share one server, so none could calibrate while it ran. After it stopped:
    each point whose device.json holds no spec gets one (the cache, or one calibration now that
    the next points then find cached); returns the points whose device.json changed (their
    summaries are stale)."""
    from loadgen.run.meta import write_meta
    changed = []
    for d in map(Path, run_dirs):
        rec = run_device.read(d)
        if rec is None or rec.get("spec"):
            continue
        status = freeze_device(d, may_calibrate=True, calibration=calibration)
        if (run_device.read(d) or {}).get("spec"):
            write_meta(d, {**_read(d / "meta.json"), "calibration": status})
            changed.append(d)
    return changed
