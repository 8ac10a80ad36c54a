"""analysis.contract: the typed contract of a run directory, and the one way analysis reads it.

    loadgen client ─► Record (record.py: THE per-request record, a msgspec Struct) ─► records.jsonl
    loadgen writers ─► Model.dump(dict) ─► meta.json (RunMeta), sut.json (Sut),
                       (validated, closed,    server.json (ServerLife), summary.json (Summary),
                        schema_version set)   device.json (Device)
    records.jsonl ─► records.py (msgspec, bounded slices) ─► Records + RecordTable (numpy arrays)
    run dir ─► Model.read / rundir.read_* ─► analysis (metrics, report, roofline, energy, server)
               (also power.jsonl, server_metrics.jsonl, power_sources.json, sweep.json, repeat.json)
    run dir ─► rundir.validate_run_dir ─► the problems, one line each   (the suite's schema test)
    timing.py: ttft, tpot, e2el, schedule lag, token chunks, ITL, chunk gaps: defined once
    models ─► export.py ─► docs/schema/*.json   (python -m analysis.contract.export docs/schema)
    open_run.py: RunData (typed files, pandas records()/chunks() from the arrays) for notebooks

Reading is permissive (keys a newer or older writer added are kept or ignored; dirs without
``schema_version`` read); writing is closed (every top-level key named here).
May import: pydantic, msgspec, numpy; open_run.py also pandas and analysis.metrics.summary
(lazily). Never loadgen, never a figure module (tests/test_layering.py).
"""
from analysis.contract.base import SCHEMA_VERSION, ContractError, Model
from analysis.contract.device import Device
from analysis.contract.meta import RunMeta
from analysis.contract.record import ERROR_KINDS, Record, RunRecord
from analysis.contract.rundir import (check_run_dir, read_device, read_meta, read_server,
                                      read_summary, read_sut, validate_run_dir)
from analysis.contract.summary import Summary
from analysis.contract.target import ServerLife, Sut

__all__ = ["SCHEMA_VERSION", "ContractError", "Model", "RunMeta", "Record", "RunRecord", "ERROR_KINDS",
           "Summary", "Sut", "ServerLife", "Device", "validate_run_dir", "check_run_dir",
           "read_meta", "read_sut", "read_server", "read_summary", "read_device"]
