"""An offline refit: the calibrated forecast from kept probe run directories, checked against a
kept sweep, with no server started and no load sent.

    probe run directories (<output.dir>/predict-<name>/<stamp>-probe-concurrency-<c>/: their
    scenario.yaml, summary.json and device.json, as predict_probe.run_probes left them)
        ─► probe_from_dir() ─► {"point", "run_dir", "requests", "measured"} (run_probes' shape)
    sweep directory (sweep.json + each point's scenario.yaml and summary.json)
        ─► the scenario (a point's scenario.yaml with sweep.values from sweep.json)
    ─► Predictor(scenario, the probes' frozen device, probes=...) ─► fit ─► forecast per point
    ─► refit() ─► (predictor, rows [{"param", "value", "run_dir", "error": forecast.error()}])
    the same device, no overheads ─► bound_check() ─► the sweep figures that beat the spec-only
       bound (it should hold: a beaten bound says the device spec is below what the engine does)

Only the probes are fitted; the sweep's summaries are only compared against. The device is the
spec the first probe froze in its device.json (the one the live forecast used), not this host's
calibration now. ScenarioError names the directory or file when one is unusable.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from analysis.predict.forecast import error, measured
from analysis.predict.simulate import LoadPoint
from analysis.roofline import devices, run_device
from loadgen.multirun.predict import Predictor
from loadgen.scenario.loader import load_scenario, scenario_from_dict
from loadgen.scenario.model import ScenarioError

FIGS = ("ttft_ms_p50", "tpot_ms_p50", "output_throughput")


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ScenarioError(f"{path}: unreadable ({type(e).__name__})") from None


def probe_from_dir(run_dir: str | Path) -> dict:
    """One kept probe, as run_probes returned it: its concurrency from its scenario.yaml."""
    d = Path(run_dir)
    sc = load_scenario(d / "scenario.yaml")
    s = read_json(d / "summary.json")
    m = {k: measured(s, k) for k in FIGS}
    return {"point": LoadPoint("closed", concurrency=int(sc.load.concurrency or 1)),
            "run_dir": str(d), "requests": int(s.get("requests_completed") or 0),
            "measured": m if any(v is not None for v in m.values()) else None}


def device_from_dir(run_dir: str | Path) -> dict:
    """The device spec a run froze in its device.json (a device dict as device_of() returns)."""
    rec = run_device.read(run_dir)
    if not rec or not rec.get("spec"):
        return {"spec": None, "how": f"{run_dir}: no device.json spec", "what_if": False,
                "name": None}
    spec = devices.DeviceSpec.from_dict(rec["spec"])
    return {"spec": spec, "how": f"frozen in {Path(run_dir) / 'device.json'}: {rec.get('how')}",
            "what_if": False, "name": spec.name}


def sweep_scenario(sweep_dir: str | Path):
    """The sweep's scenario: its first point's scenario.yaml with sweep.json's values."""
    d = Path(sweep_dir)
    sw = read_json(d / "sweep.json")
    points = sw.get("points") or []
    if not points:
        raise ScenarioError(f"{d / 'sweep.json'}: no points")
    tree = load_scenario(d / points[0]["run_dir"] / "scenario.yaml").model_dump(mode="json")
    tree["sweep"] = {"param": sw["param"], "values": [p["value"] for p in points]}
    return scenario_from_dict(tree), points


def bound_check(sweep_dir: str | Path, device: dict) -> list[dict]:
    """The spec-only forecast of every kept sweep point against what it measured: the figures
    that beat the bound ({value, figure, forecast, measured}); empty when the bound held."""
    sc, points = sweep_scenario(sweep_dir)
    if device.get("spec") is None:
        return []
    res = Predictor(sc, device).result()
    out = []
    for p, f in zip(points, res["points"]):
        e = error(f, read_json(Path(sweep_dir) / p["run_dir"] / "summary.json"))
        out += [{"value": p["value"], "figure": k, "forecast": v["forecast"],
                 "measured": v["measured"]} for k, v in e.items() if v.get("beats_bound")]
    return out


def refit(probe_dirs: list[str | Path], sweep_dir: str | Path,
          device: Optional[dict] = None) -> tuple[Predictor, list[dict]]:
    """Fit the probes, forecast every point of the kept sweep, and each point's error."""
    if not probe_dirs:
        raise ScenarioError("--offline: give at least one probe run directory")
    probes = [probe_from_dir(p) for p in probe_dirs]
    sc, points = sweep_scenario(sweep_dir)
    pred = Predictor(sc, device or device_from_dir(probe_dirs[0]), probes=probes)
    res = pred.result()
    rows = []
    for p, f in zip(points, res["points"]):
        summary = read_json(Path(sweep_dir) / p["run_dir"] / "summary.json")
        rows.append({"param": f["param"], "value": p["value"], "run_dir": p["run_dir"],
                     "error": error(f, summary)})
    return pred, rows
