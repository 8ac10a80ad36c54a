"""A run directory checked against the contract, and its files read through the models.

    run_dir ─► validate_run_dir(path) ─► ["file: field: problem", ...]   ([]: every file fits;
               records.jsonl also: what its lines say, analysis.contract.sanity)
            ─► read_meta / read_sut / read_summary / read_server / read_device
               (None when the file is absent)
            ─► read_rows / read_power / read_server_metrics (free-form JSON lines),
               read_json / read_power_sources / read_sweep / read_repeat (free-form JSON)
            ─► read_scenario (scenario.yaml, the resolved scenario: a YAML 1.2 mapping)
    records.jsonl itself: analysis.contract.records (typed Records, arrays)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import msgspec

from analysis.contract.base import SCHEMA_VERSION, ContractError, Model
from analysis.contract.device import Device
from analysis.contract.meta import RunMeta
from analysis.contract.record import ClosedRecord, Record, problem_line
from analysis.contract.summary import Summary
from analysis.contract.target import ServerLife, Sut

FILES: dict[str, type[Model]] = {"meta.json": RunMeta, "sut.json": Sut,
                                  "server.json": ServerLife, "summary.json": Summary,
                                  "device.json": Device}
REQUIRED = ("records.jsonl", "meta.json")
_MSGSPEC = msgspec.json.Decoder().decode


def _JSON(data: bytes):
    """msgspec's decode; what it refuses (NaN, Infinity: Python's json writes them) by json."""
    try:
        return _MSGSPEC(data)
    except msgspec.DecodeError:
        try:
            return json.loads(data)
        except ValueError:
            raise msgspec.DecodeError("not JSON") from None


def _read(run_dir, name: str):
    p = Path(run_dir) / name
    return FILES[name].read_file(p) if p.is_file() else None


def has_records(run_dir: str | Path) -> bool:
    """The directory holds a run's records (records.jsonl or records.arrow)."""
    return records_path(run_dir).is_file()


def records_path(run_dir: str | Path) -> Path:
    """The run's records store: records.arrow (columnar.py) where there is one, else
    records.jsonl."""
    d = Path(run_dir)
    return d / "records.arrow" if (d / "records.arrow").is_file() else d / "records.jsonl"


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


def read_dict(run_dir, name: str) -> dict:
    """``name`` (meta.json, sut.json, ...) through its model, as the dict of what it holds;
    {} when absent or when it does not fit (the caller then says what it lacks)."""
    try:
        m = _read(run_dir, name)
    except ContractError:
        return {}
    return m.as_dict() if m is not None else {}


def read_rows(path: str | Path) -> list[dict]:
    """A JSON-lines file of free-form rows (power.jsonl, server_metrics.jsonl) as dicts; no file
    ─► []; a line that is not a JSON object (a torn last line) is skipped."""
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    with open(p, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                row = _JSON(line)
            except msgspec.DecodeError:
                continue
            if isinstance(row, dict):
                out.append(row)
    return out


def read_json(path: str | Path) -> Optional[dict]:
    """A free-form JSON file of a run or sweep directory (power_sources.json, sweep.json,
    repeat.json, a point's summary) as a dict; None when absent or not a JSON object."""
    p = Path(path)
    try:
        v = _JSON(p.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    return v if isinstance(v, dict) else None


def read_power(run_dir) -> list[dict]:
    return read_rows(Path(run_dir) / "power.jsonl")


def read_power_sources(run_dir) -> list:
    return (read_json(Path(run_dir) / "power_sources.json") or {}).get("sources") or []


def read_server_metrics(run_dir) -> list[dict]:
    return read_rows(Path(run_dir) / "server_metrics.jsonl")


def read_sweep(sweep_dir) -> Optional[dict]:
    return read_json(Path(sweep_dir) / "sweep.json")


def read_repeat(series_dir) -> Optional[dict]:
    return read_json(Path(series_dir) / "repeat.json")


def read_scenario(run_dir) -> dict:
    """scenario.yaml (the resolved scenario) as a dict; {} when absent, not YAML or not a mapping.
    A file that cannot be read (OSError, not UTF-8) raises."""
    from analysis.contract import yaml12
    p = Path(run_dir) / "scenario.yaml"
    if not p.is_file():
        return {}
    try:
        tree = yaml12.load(p.read_text(encoding="utf-8"))
    except yaml12.YAMLError:
        return {}
    return tree if isinstance(tree, dict) else {}


def record_problems(path: str | Path, written: bool = True) -> list[str]:
    """Each records.jsonl (or probe_stream.jsonl) line that is not a RunRecord (a torn last
    line is allowed)."""
    out: list[str] = []
    name = Path(path).name
    dec = msgspec.json.Decoder(ClosedRecord if written else Record)
    lines = Path(path).read_bytes().splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            dec.decode(line)
        except msgspec.ValidationError as e:
            out.append(problem_line(e, f"{name}:{i}"))
        except msgspec.DecodeError:
            if i < len(lines):      # only the last line may be torn (killed mid-write)
                out.append(f"{name}:{i}: not JSON")
    return out


def validate_run_dir(run_dir: str | Path, written: bool = True) -> list[str]:
    """Every problem of a run directory's files against the contract, one line each ([]: none).

    ``written=True`` (a directory this version wrote): also no key outside the contract and
    ``schema_version`` = SCHEMA_VERSION in each JSON file. ``written=False``: readable only."""
    d = Path(run_dir)
    out = [f"{name}: missing" for name in REQUIRED if not (d / name).is_file()
           and not (name == "records.jsonl" and (d / "records.arrow").is_file())]
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
    for name in ("records.jsonl", "records.arrow", "probe_stream.jsonl"):  # probe: load.probe
        if (d / name).is_file():
            bad = (record_problems if name != "records.arrow" else _arrow_problems)(d / name,
                                                                                     written)
            out += bad
            if not bad and name != "probe_stream.jsonl":    # what the records say (sanity.py)
                out += [f"{name}: {r}" for r in _faults(d, name)]
    return out


def _arrow_problems(path: Path, written: bool = True) -> list[str]:
    from analysis.contract.columnar import problems
    return problems(path)


def _faults(d: Path, name: str) -> list[str]:
    from analysis.contract.records import read_table
    from analysis.contract.sanity import record_faults, slack_for
    meta = read_dict(d, "meta.json")
    return record_faults(read_table(d / name), slack_for(meta)).reasons()


def check_run_dir(run_dir: str | Path, written: bool = True) -> None:
    """validate_run_dir, raising ContractError with every problem."""
    bad = validate_run_dir(run_dir, written)
    if bad:
        raise ContractError(f"{run_dir} (contract version {SCHEMA_VERSION}):\n" + "\n".join(bad))
