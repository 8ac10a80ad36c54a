"""The device spec of a run, frozen into its directory as device.json when the run ends.

    at run time:    meta.json + sut.json + (catalogue | spec file | this host's calibration)
                        ─► resolve() ─► (DeviceSpec | None, how) ─► record() ─► RUN/device.json
    at report time: RUN/device.json ─► for_run() {"source": "frozen", "how", "spec"}
                    (no device.json: meta.json "device_spec" file, else "device spec not recorded")
                    ``with override(parse_override("h100-sxm" | PATH | "calibrate")):`` replaces
                    it for everything computed inside (``loadgen report --device``), labelled so

device.json (its model: analysis.contract.Device, written through Device.dump):
{"schema_version", "status": "recorded" | "none", "frozen_at", "frozen_on", "how", "reason",
"spec": DeviceSpec.to_dict() (figures with evidence; a calibration's meta carries date, host,
method, host_load and the evidence label)}. The global calibration cache is read only
at run time (resolve) and by an explicit ``--device calibrate``; never silently by a report.
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import json
import socket
from pathlib import Path
from typing import Optional

from analysis.contract import SCHEMA_VERSION, ContractError, Device, RunMeta, Sut
from analysis.contract.device import SpecMeta
from analysis.contract.rundir import read_json, read_meta
from analysis.roofline import devices
from analysis.roofline.calibrate import DEFAULT_PATH

DEVICE_FILE = "device.json"
NOT_RECORDED = ("no device spec (device spec not recorded: the run directory has no device.json; "
                "`loadgen report RUN --device NAME|calibrate` recomputes against a spec you name)")

_OVERRIDE: contextvars.ContextVar[Optional[dict]] = contextvars.ContextVar("device_override",
                                                                           default=None)


def server_info(sut: dict | Sut) -> dict:
    """The server's own description (JAX /info) in sut.json, or {} (as analysis.report.sut)."""
    return Sut.read(sut).info


def resolve(meta: dict | RunMeta, sut: dict | Sut, calibration: Path = DEFAULT_PATH):
    """(spec, how it was chosen) at run time: a spec file named in meta (``device_spec``); else
    the catalogue entry matching the server's device name; else this host's calibration when it
    was measured on the run's host for the same kind of device (cpu vs not); else (None, why)."""
    path = RunMeta.read(meta).device_spec
    if isinstance(path, str):
        try:
            return devices.load_spec(path), f"spec file {path}"
        except (OSError, ValueError, KeyError) as e:
            return None, f"device spec {path} unreadable ({e})"
    info = server_info(sut)
    name = info.get("device_kind") or info.get("device")
    spec = devices.find(str(name)) if name else None
    if spec is not None:
        return spec, f"catalogue match on the server's device name {name!r}"
    cal = Path(calibration).expanduser()
    if cal.is_file():
        try:
            spec = devices.load_spec(cal)
        except (OSError, ValueError, KeyError):
            spec = None
        sut = Sut.read(sut)
        host = sut.client_host.hostname if sut.client_host else None
        sm = SpecMeta.read(spec.meta) if spec is not None else SpecMeta()
        same_kind = (spec is not None and (sm.kind == "cpu")
                     == (info.get("backend") == "cpu"))          # info: the server's /info
        if spec is not None and host and sm.host == host and same_kind:
            return spec, f"local calibration {calibration} (measured on {host} at {sm.date})"
    return None, ("no device spec: the server's device is not in analysis.roofline.devices, no "
                  "spec file was named (meta.device_spec) and no local calibration of this host "
                  "matches")


def record(spec: Optional[devices.DeviceSpec], how: str,
           calibration: Optional[dict] = None) -> dict:
    """device.json's content for ``spec`` (or for none, ``how`` then saying why);
    ``calibration``: which calibration it is (analysis.roofline.calib_cache.provenance)."""
    out = {"schema_version": SCHEMA_VERSION, "status": "recorded" if spec else "none",
           "frozen_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "frozen_on": socket.gethostname(), "how": how if spec else None,
           "reason": None if spec else how, "spec": spec.to_dict() if spec else None}
    if calibration is not None:
        out["calibration"] = calibration
    return out


def write(run_dir: str | Path, rec: dict) -> Path:
    """RUN/device.json through the contract (analysis.contract.Device.dump: the spec's keys
    named, schema_version set; ContractError naming a key outside it)."""
    p = Path(run_dir) / DEVICE_FILE
    p.write_text(json.dumps(Device.dump(rec), indent=2) + "\n", encoding="utf-8")
    return p


def read(run_dir: str | Path) -> Optional[dict]:
    """device.json of a run, or None when absent or unreadable."""
    return read_json(Path(run_dir) / DEVICE_FILE)      # as written (the spec checked below)


def parse_override(value: str, calibration: Path = DEFAULT_PATH) -> dict:
    """``--device``'s value: "calibrate" (the spec `loadgen calibrate` saved on this host), a
    spec JSON file, or a catalogue key. ValueError (one line naming the flag) otherwise."""
    if value == "calibrate":
        cal = Path(calibration).expanduser()
        if not cal.is_file():
            raise ValueError(f"--device calibrate: no calibration at {cal} (run `loadgen "
                             "calibrate` first)")
        path, how = cal, f"--device calibrate: {cal}"
    elif Path(value).expanduser().is_file():
        path, how = Path(value).expanduser(), f"--device {value} (spec file)"
    else:
        try:
            return {"source": "override", "how": f"--device {value} (catalogue)",
                    "spec": devices.get(value)}
        except KeyError:
            raise ValueError(f"--device: {value!r} is neither 'calibrate', a spec file nor a "
                             f"catalogue device ({', '.join(devices.CATALOGUE)})") from None
    try:
        spec = devices.load_spec(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"--device: {path}: not a device spec ({type(e).__name__}: {e})") from None
    return {"source": "override", "how": how, "spec": spec}


@contextlib.contextmanager
def override(device: dict):
    """Inside the block, for_run() returns ``device`` (from parse_override) for every run."""
    token = _OVERRIDE.set(device)
    try:
        yield device
    finally:
        _OVERRIDE.reset(token)


def for_run(run_dir: str | Path, meta: Optional[dict] = None) -> dict:
    """{"source", "how", "spec" (DeviceSpec or None), "reason", "frozen" (the device.json spec's
    name, when an override replaces it)} for a run's roofline."""
    rec = read(run_dir)
    frozen_name = ((rec.get("spec") or {}).get("name") if rec else None)
    ov = _OVERRIDE.get()
    if ov is not None:
        return {**ov, "reason": None, "frozen": frozen_name}
    if rec is not None:
        if rec.get("spec"):
            try:
                spec = devices.DeviceSpec.from_dict(rec["spec"])
            except (KeyError, TypeError, ValueError) as e:
                return {"source": "frozen", "how": None, "spec": None,
                        "reason": f"no device spec ({DEVICE_FILE} unreadable: {e})"}
            return {"source": "frozen", "how": rec.get("how"), "spec": spec, "reason": None,
                    "frozen_at": rec.get("frozen_at")}
        return {"source": "frozen", "how": None, "spec": None,
                "reason": f"no device spec at run time ({rec.get('reason')})"}
    if meta is None:
        try:
            m = read_meta(run_dir)
        except ContractError:
            m = None
        path = m.device_spec if m is not None else None
    else:
        path = meta.get("device_spec") if isinstance(meta, dict) else None
    if isinstance(path, str):
        try:
            return {"source": "meta.device_spec", "spec": devices.load_spec(path), "reason": None,
                    "how": f"spec file {path} named in meta.json (read now, not frozen)"}
        except (OSError, ValueError, KeyError, TypeError) as e:
            return {"source": "meta.device_spec", "how": None, "spec": None,
                    "reason": f"no device spec (meta.json's device_spec {path} unreadable: {e})"}
    return {"source": None, "how": None, "spec": None, "reason": NOT_RECORDED}
