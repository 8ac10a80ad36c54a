"""device.json's model (analysis.contract.Device): what run_device.py writes, validate_run_dir checks."""
import json

import pytest

from analysis.contract import SCHEMA_VERSION, ContractError, Device, read_device, validate_run_dir
from analysis.roofline import devices, run_device


def calibrated_spec() -> devices.DeviceSpec:
    """A spec as `loadgen calibrate` saves one: measured figures, provenance and host load."""
    fig = devices.Figure(2.6e10, "B/s", "measured", "this host", "copy of 128 MiB")
    return devices.DeviceSpec(
        "local cpu: test", "this host (cpu)", peak={"fp32": devices.Figure(
            None, "FLOP/s", "unmeasured", "this host", "", "no backend")},
        mem_bandwidth=fig, match=["test", "cpu"],
        meta={"evidence": "measured (busy host: load 1.9, spread 22 %)", "date": "2026-12-03",
              "host": "vm", "kind": "cpu", "methods": {"copy": {"bytes": 1}},
              "host_load": {"busy": True, "reasons": ["steal 9%"], "loadavg_1m": 1.9,
                            "spreads": {"copy": 0.22}, "attempts": [{"busy": True}]}})


@pytest.mark.parametrize("spec", [devices.get("h100-sxm"), devices.get("core-ultra-9-288v-npu"),
                                  calibrated_spec()], ids=lambda s: s.name)
def test_what_frozen_writes_fits_the_model_and_reads_back(tmp_path, spec):
    run_device.write(tmp_path, run_device.record(spec, "catalogue match"))
    data = json.loads((tmp_path / "device.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION and data["status"] == "recorded"
    assert Device.problems(data, "device.json") == []
    back = devices.DeviceSpec.from_dict(data["spec"])      # the roofline reads the same figures
    assert back.bandwidth() == spec.bandwidth() and back.meta == spec.meta
    assert read_device(tmp_path).spec.mem_bandwidth.evidence == spec.mem_bandwidth.evidence


def test_no_spec_is_recorded_with_its_reason(tmp_path):
    run_device.write(tmp_path, run_device.record(None, "no device spec: not in the catalogue"))
    d = read_device(tmp_path)
    assert d.status == "none" and d.spec is None and d.reason.startswith("no device spec")
    assert read_device(tmp_path / "elsewhere") is None


def test_a_key_outside_the_contract_is_refused_when_written(tmp_path):
    rec = run_device.record(devices.get("h200"), "catalogue")
    with pytest.raises(ContractError, match="spec.bogus"):
        run_device.write(tmp_path, {**rec, "spec": {**rec["spec"], "bogus": 1}})
    assert not (tmp_path / "device.json").exists()


def test_validate_run_dir_checks_device_json_when_present(tmp_path):
    (tmp_path / "records.jsonl").write_text("")
    (tmp_path / "meta.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION}))
    assert validate_run_dir(tmp_path) == []                 # no device.json: nothing to check
    rec = run_device.record(devices.get("h200"), "catalogue")
    (tmp_path / "device.json").write_text(json.dumps({**rec, "spec": None}))
    bad = validate_run_dir(tmp_path)
    assert len(bad) == 1 and bad[0].startswith("device.json: ") and "without a spec" in bad[0]
    rec["spec"]["mem_bandwidth"]["value"] = "fast"
    (tmp_path / "device.json").write_text(json.dumps(rec))
    assert validate_run_dir(tmp_path)[0].startswith("device.json: spec.mem_bandwidth.value: ")
