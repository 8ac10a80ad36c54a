"""A run directory checked against the contract, and its files read through the models.

    run_dir ─► validate_run_dir(path) ─► ["file: field: problem", ...]   ([]: every file fits)
            ─► read_meta / read_sut / read_summary / read_server / read_device
               (None when the file is absent)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from analysis.contract.base import SCHEMA_VERSION, ContractError, Model, unnamed_keys
from analysis.contract.device import Device
from analysis.contract.meta import RunMeta
from analysis.contract.record import RunRecord
from analysis.contract.summary import Summary
from analysis.contract.target import ServerLife, Sut

FILES: dict[str, type[Model]] = {"meta.json": RunMeta, "sut.json": Sut,
                                  "server.json": ServerLife, "summary.json": Summary,
                                  "device.json": Device}
REQUIRED = ("records.jsonl", "meta.json")


def _read(run_dir, name: str):
    p = Path(run_dir) / name
    return FILES[name].read_file(p) if p.is_file() else None


def read_meta(run_dir) -> Optional[RunMeta]:
    return _read(run_dir, "meta.json")


def read_sut(run_dir) -> Optional[Sut]:
    return _read(run_dir, "sut.json")


def read_server(run_dir) -> Optional[ServerLife]:
    return _read(run_dir, "server.json")


def read_summary(run_dir) -> Optional[Summary]:
    return _read(run_dir, "summary.json")


def read_device(run_dir) -> Optional[Device]:
    return _read(run_dir, "device.json")


def record_problems(path: str | Path, written: bool = True) -> list[str]:
    """Each records.jsonl (or probe_stream.jsonl) line that is not a RunRecord (a torn last
    line is allowed)."""
    out: list[str] = []
    name = Path(path).name
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            if i < len(lines):      # only the last line may be torn (killed mid-write)
                out.append(f"{name}:{i}: not JSON")
            continue
        try:
            rec = RunRecord.read(data, f"{name}:{i}")
        except ContractError as e:
            out += str(e).splitlines()
            continue
        if written:
            out += [f"{name}:{i}: {k}: not in the contract" for k in unnamed_keys(rec)]
    return out


def validate_run_dir(run_dir: str | Path, written: bool = True) -> list[str]:
    """Every problem of a run directory's files against the contract, one line each ([]: none).

    ``written=True`` (a directory this version wrote): also no key outside the contract and
    ``schema_version`` = SCHEMA_VERSION in each JSON file. ``written=False``: readable only."""
    d = Path(run_dir)
    out = [f"{name}: missing" for name in REQUIRED if not (d / name).is_file()]
    for name, model in FILES.items():
        p = d / name
        if not p.is_file():
            continue
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except ValueError as e:
            out.append(f"{name}: not JSON ({e})")
            continue
        out += model.problems(data, name, written)
    for name in ("records.jsonl", "probe_stream.jsonl"):     # the second: load.probe only
        if (d / name).is_file():
            out += record_problems(d / name, written)
    return out


def check_run_dir(run_dir: str | Path, written: bool = True) -> None:
    """validate_run_dir, raising ContractError with every problem."""
    bad = validate_run_dir(run_dir, written)
    if bad:
        raise ContractError(f"{run_dir} (contract version {SCHEMA_VERSION}):\n" + "\n".join(bad))
