"""analysis.contract: the typed contract of a run directory (pydantic models, JSON Schema).

    loadgen writers ─► Model.dump(dict) ─► meta.json (RunMeta), sut.json (Sut),
                       (validated, closed,    server.json (ServerLife), summary.json (Summary),
                        schema_version set)   device.json (Device), records.jsonl (RunRecord per line)
    run dir ─► Model.read / rundir.read_* ─► analysis (metrics, report), loadgen.open_run
    run dir ─► rundir.validate_run_dir ─► the problems, one line each   (the suite's schema test)
    models ─► export.py ─► docs/schema/*.json   (python -m analysis.contract.export docs/schema)
    open_run.py: RunData (typed files, pandas records()/chunks()) for notebooks

Reading is permissive (keys a newer or older writer added are kept; dirs without
``schema_version`` read); writing is closed (every top-level key named here).
May import: pydantic; open_run.py also analysis.metrics and pandas (lazily). Never loadgen.
"""
from analysis.contract.base import SCHEMA_VERSION, ContractError, Model
from analysis.contract.device import Device
from analysis.contract.meta import RunMeta
from analysis.contract.record import ERROR_KINDS, RunRecord
from analysis.contract.rundir import (check_run_dir, read_device, read_meta, read_server,
                                      read_summary, read_sut, validate_run_dir)
from analysis.contract.summary import Summary
from analysis.contract.target import ServerLife, Sut

__all__ = ["SCHEMA_VERSION", "ContractError", "Model", "RunMeta", "RunRecord", "ERROR_KINDS",
           "Summary", "Sut", "ServerLife", "Device", "validate_run_dir", "check_run_dir",
           "read_meta", "read_sut", "read_server", "read_summary", "read_device"]
