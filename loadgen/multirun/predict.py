"""A scenario's forecast: its model shape, device, workload and load points, and the probes.

    Scenario ─► inputs(sc, device) ─► shape (servers.jax preset | config.json), device spec
               (--device NAME|PATH|calibrate, else this host's calibration), workload lengths,
               load points (sweep.values, else the scenario's own load point)
    spec only  ─► analysis.predict.forecast.forecast(...)                       (grade spec-only)
    --calibrate ─► probe(): 2–3 short closed-loop runs of this server (≤ 60 s in all), each a normal
               run directory under <output.dir>/predict-<name>/probe-concurrency-<c>/ (kept, never
               a sweep point) ─► analysis.predict.fit.fit_overheads ─► forecast  (grade calibrated)
    Predictor ─► per sweep value: the point's forecast; with its summary ─► summary.json "forecast"

User errors (no shape, no device spec for a spec-only forecast) raise ScenarioError naming the
field or flag.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from analysis.predict import workload as wl
from analysis.predict.engine_jax import JaxEngine
from analysis.predict.fit import fit_overheads
from analysis.predict.forecast import forecast, n_requests, point_load, summary_block
from analysis.predict.simulate import LoadPoint
from analysis.predict.step_model import Overheads, StepModel
from analysis.roofline import model_spec, run_device
from analysis.roofline.calibrate import DEFAULT_PATH
from loadgen.scenario.model import Scenario, ScenarioError

PROBE_BUDGET_S = 60.0
JAX_SLOTS, JAX_CHUNK = 8, 16            # servers/jax/serve.py defaults (--slots, --interleave-chunk)


def device_of(value: Optional[str], calibration: Path = DEFAULT_PATH) -> dict:
    """{"spec", "how", "what_if"}: --device's spec, else this host's calibration, else none."""
    if value:
        try:
            got = run_device.parse_override(value, calibration)
        except ValueError as e:
            raise ScenarioError(str(e)) from None
        catalogue = got["how"].endswith("(catalogue)")
        return {"spec": got["spec"], "how": got["how"], "what_if": catalogue,
                "name": got["spec"].name}
    cal = Path(calibration).expanduser()
    if cal.is_file():
        got = run_device.parse_override("calibrate", calibration)
        return {"spec": got["spec"], "how": f"this host's calibration {cal}", "what_if": False,
                "name": got["spec"].name}
    return {"spec": None, "how": "no device spec (no --device, no `loadgen calibrate` output)",
            "what_if": False, "name": None}


def info_shape(url: str, timeout_s: float = 5.0) -> Optional[dict]:
    """The shape a running server publishes in GET /info (servers.jax: "model"), or None."""
    import json
    import urllib.request
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/info", timeout=timeout_s) as r:
            return model_spec.shape_in_sut(json.loads(r.read(1 << 20)))
    except (OSError, ValueError):
        return None


def shape_of(sc: Scenario, device: dict, model_config: Optional[str] = None) -> dict:
    """The served model's shape dict: --model-config (a config.json), target.server (a JAX
    preset or a local model directory), else what target.url's GET /info publishes.
    ScenarioError names the flag or field when there is none."""
    srv = sc.target.server
    if model_config:
        try:
            return model_spec.from_hf_config(Path(model_config).expanduser(),
                                             slots=srv.slots if srv else None)
        except model_spec.ModelSpecError as e:
            raise ScenarioError(f"--model-config: {e}") from None
    if srv is None:
        shape = info_shape(sc.target.primary_url or "")
        if shape is None:
            raise ScenarioError("target: predict needs the model's shape: give --model-config "
                                "PATH (a config.json), target.server (kind jax with a preset, or "
                                "a local model directory), or a server whose GET /info "
                                "publishes it (servers.jax)")
        return shape
    gpu = device.get("what_if") or (device.get("spec") is not None
                                    and (device["spec"].meta or {}).get("kind") not in (None, "cpu"))
    dtype = srv.dtype or ("bf16" if gpu else "fp32")
    if srv.kind == "jax" and not srv.model:
        from servers.jax.presets import get_preset, shape_dict
        try:
            args = get_preset(srv.preset)
        except ValueError as e:
            raise ScenarioError(f"target.server.preset: {e}") from None
        return shape_dict(args, dtype, srv.max_model_len or args.max_position,
                          srv.slots or JAX_SLOTS)
    if not srv.model or not Path(srv.model).expanduser().exists():
        raise ScenarioError(f"target.server.model: {srv.model!r} is not a local directory with "
                            "a config.json (predict reads the shape from it)")
    slots = srv.slots or int(srv.args.get("max-num-seqs") or srv.args.get("max_num_seqs") or 256)
    try:
        return model_spec.from_hf_config(Path(srv.model).expanduser(), dtype=srv.dtype or None,
                                         max_model_len=srv.max_model_len, slots=slots)
    except model_spec.ModelSpecError as e:
        raise ScenarioError(f"target.server.model: {e}") from None


def prefill_chunk(sc: Scenario) -> Optional[int]:
    srv = sc.target.server
    if srv is not None and srv.kind == "jax":
        return srv.interleave_chunk if srv.interleave_chunk is not None else JAX_CHUNK
    return None


def engine_of(sc: Scenario) -> Optional[JaxEngine]:
    """The scheduler to mirror: servers.jax's loop for a target.server of kind jax, else None
    (the generic one step, one prefill chunk scheduler of simulate.py)."""
    srv = sc.target.server
    if srv is None or srv.kind != "jax":
        return None
    return JaxEngine(interleave_chunk=prefill_chunk(sc) or 0)


def load_points(sc: Scenario) -> list[tuple[str, float, LoadPoint]]:
    """(param, value, LoadPoint) of each sweep value, else of the scenario's own load."""
    load = sc.load.model_dump(mode="json")
    if not sc.load.steady:
        raise ScenarioError(f"load.{'stages' if sc.load.stages else 'mode'}: predict forecasts "
                            "one steady load per point (mode concurrency, offline or server "
                            "without stages)")
    if sc.sweep is not None and sc.sweep.values:
        param, values = sc.sweep.param, list(sc.sweep.values)
    else:
        param, own = sc.load.knob
        values = [own]
    if param == "load.rate" and sc.load.rate is None and sc.load.knob[0] != "load.rate":
        raise ScenarioError("sweep.param: load.rate needs load.mode server")
    if param == "load.concurrency":
        values = [int(v) for v in values]
    return [(param, v, point_load(param, v, load, **sc.load.point_shape)) for v in values]


def workload_of(sc: Scenario) -> dict:
    w = sc.workload
    return {"prompt_tokens": w.prompt_tokens.model_dump(mode="json"),
            "output_tokens": w.output_tokens.model_dump(mode="json")}


def probe_concurrencies(slots: Optional[int], points) -> list[int]:
    """1, about half the slots, the slots — capped by the largest concurrency forecast."""
    top = max([lp.concurrency or 1 for _, _, lp in points if lp.kind == "closed"] or [slots or 8])
    s = min(slots or top, max(top, 2))
    return sorted({1, max(1, math.ceil(s / 2)), s})[:3]


class Predictor:
    """The forecast of one scenario; ``calibrate`` runs the probes first."""

    def __init__(self, sc: Scenario, device: Optional[str] | dict = None, calibrate: bool = False,
                 runner=None, model_config: Optional[str] = None,
                 probes: Optional[list[dict]] = None, managed=None):
        """``device``: --device's value, or a device dict as device_of() returns (an offline
        refit passes the spec its probes froze); ``probes``: already measured probes (an
        offline refit, predict_offline.py) instead of running them; ``managed``: a running
        target.server for the probes (a sweep's own), else they start and stop one."""
        self.sc = sc
        self.device = device if isinstance(device, dict) else device_of(device)
        self.shape = shape_of(sc, self.device, model_config)
        self.points = load_points(sc)
        self.workload = workload_of(sc)
        self.load = sc.load.model_dump(mode="json")
        self.chunk = prefill_chunk(sc)
        self.engine = engine_of(sc)
        self.fit: Optional[dict] = None
        self.probes: list[dict] = []
        if not calibrate and probes is None and self.device["spec"] is None:
            raise ScenarioError("--device: a spec-only forecast needs a device spec: give "
                                "--device NAME|PATH|calibrate, run `loadgen calibrate`, or "
                                "add --calibrate")
        if probes is not None:
            self.probes = probes
            self.fit = self._fit()
        elif calibrate:
            from loadgen.multirun.predict_probe import run_probes
            self.probes = run_probes(sc, probe_concurrencies(self.shape.get("slots"), self.points),
                                     PROBE_BUDGET_S, runner, managed)
            self.fit = self._fit()

    def _model(self) -> StepModel:
        return StepModel(self.shape, self.device["spec"], Overheads(), self.shape.get("slots"),
                         self.chunk, self.engine)

    def _fit(self) -> dict:
        usable = [p for p in self.probes if p.get("measured")]
        if not usable:
            raise ScenarioError("--calibrate: no probe completed a request (see the probe "
                                "run directories)")
        for p in usable:
            p["pairs"] = wl.sample(self.workload, n_requests({**self.load, "num_requests":
                                                              p["requests"]}, p["point"]))
        fit = fit_overheads(self._model(), usable, scale_floor=True)
        fit["probes"] = [{"concurrency": p["point"].concurrency, "run_dir": p["run_dir"],
                          "measured": p["measured"]} for p in self.probes]
        return fit

    @property
    def overheads(self) -> Optional[Overheads]:
        if not self.fit:
            return None
        return Overheads(**self.fit["overheads"],
                         floor_scale=(self.fit.get("floor") or {}).get("scale", 1.0))

    def notes(self) -> list[str]:
        src = self.sc.workload.source
        return ([] if src == "synthetic" else
                [f"workload.source {src}: the file's lengths are not read; the forecast draws "
                 "from workload.prompt_tokens and workload.output_tokens"])

    def result(self, points=None) -> dict:
        dev = {k: v for k, v in self.device.items() if k != "spec"}
        return {**self._result(points, dev), "notes": self.notes()}

    def _result(self, points, dev) -> dict:
        return forecast(self.shape, self.device["spec"], self.workload, points or self.points,
                        self.load, overheads=self.overheads, fit=self.fit,
                        slots=self.shape.get("slots"), prefill_chunk=self.chunk, device=dev,
                        engine=self.engine)

    def block(self, value: float, summary: dict) -> dict:
        """summary.json "forecast" of the sweep point at ``value`` (any value, searches too)."""
        param = self.points[0][0] if self.sc.sweep is None else self.sc.sweep.param
        value = int(value) if param == "load.concurrency" else value
        lp = point_load(param, value, self.load, **self.sc.load.point_shape)
        res = self.result([(param, value, lp)])
        return summary_block(res["grade"], res["points"][0], summary)


def attach_forecasts(sweep_dir: Path, points: list[dict], predictor: Predictor) -> None:
    """``loadgen sweep --predict``: each point row and its summary.json get "forecast" (the
    point's forecast and its error against the summary's figures). Called once the points'
    summaries are final (after any re-summary at the sweep's end)."""
    import json
    from loadgen.run.storage import atomic_write_text
    for row in points:
        path = Path(sweep_dir) / row["run_dir"] / "summary.json"
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        row["forecast"] = summary["forecast"] = predictor.block(row["value"], summary)
        atomic_write_text(path, json.dumps(summary, indent=2, default=str) + "\n")
