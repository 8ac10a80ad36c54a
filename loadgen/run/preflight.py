"""Before the load: is the target there and able to serve the run? (both engines' first step)

    describe_target(run, base_url)
        ─► ready.py (wait: /health 200, no 503; api.ready_timeout_s, a live line)       [exit 2]
        ─► probe.py (GET /v1/models: reachable, authorised, api.model listed; one small request
                     with the run's body: fields the server rejects dropped or a stop) [exit 2]
           context_fit.py (largest prompt + output within the server's stated context)         [exit 2]
        ─► sut.py (/v1/models, headers, /info, client host ─► sut.json)
        ─► TargetFacts (frozen): base_url, model, drop_fields, probe (meta.json "probe"), sut
    ``run`` is read, never written (a runner.Run: sc, key, server, plan, run_dir, progress;
    the Locust engine hands its own Run the same way); runner.Run keeps the facts.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from analysis.metrics import slo as slo_mod
from loadgen.client.http_client import ClientConfig
from loadgen.run.rundir import write_json
from loadgen.scenario.model import ScenarioError
from loadgen.targets import context_fit as fit_mod
from loadgen.targets import probe as probe_mod
from loadgen.targets import ready as ready_mod
from loadgen.targets import sut as sut_mod


def startup_get_s(api) -> float:
    """How long one start-up GET (readiness, /v1/models, the self-description) may take: the
    shorter of api.connect_timeout_s and api.timeout_s, so that a server which accepts and never
    answers costs a run with ``timeout_s: 1`` about a second per GET, not 30 s."""
    return min(api.connect_timeout_s, api.timeout_s)


@dataclass(frozen=True)
class TargetFacts:
    """What preflight found of the target: the URL and model to ask, the fields it rejected
    (dropped from every request), the probe's findings (meta.json "probe"), sut.json's form."""
    base_url: str
    model: str
    drop_fields: tuple
    probe: dict
    sut: dict


async def describe_target(run, base_url: str) -> TargetFacts:
    """The model to ask for (api.model, else /v1/models' first id) and sut.json's first form;
    first the wait for readiness (loadgen.targets.ready), then with api.probe the checks of
    loadgen.targets.probe and the context fit (loadgen.targets.context_fit) (ProbeError: exit 2)."""
    a = run.sc.api
    get_s = startup_get_s(a)
    models, ready = await ready_mod.wait_ready(
        base_url, run.key, a.headers, get_s,
        ready_mod.ready_timeout_s(a, run.server is not None),
        run.server.spec.health_path if run.server is not None else "/health")
    warnings: list = slo_mod.stream_warnings(run.sc.slo.model_dump(), a.stream)
    if a.probe:
        model, found = probe_mod.check_models(
            base_url, models, a.first_model, a.api_key_env, managed=run.server is not None,
            where="target.urls" if run.sc.target.urls else None,
            key="api.models" if a.models else "api.model")
        warnings += found
        for m in (a.models or [])[1:]:          # api.models: every name listed (exit 2 if not)
            probe_mod.check_models(base_url, models, m.name, a.api_key_env, key="api.models")
    else:
        model = a.first_model or sut_mod.first_model_id(models.get("models"))
    if model is None:
        raise ScenarioError(f"api.model: not given, and {base_url}/v1/models named no model "
                            f"({models.get('error') or 'status ' + str(models.get('status'))})")
    for other in (run.sc.target.replica_urls or [])[1:]:   # every replica ready, same model
        more, _ = await ready_mod.wait_ready(
            other, run.key, a.headers, get_s,
            ready_mod.ready_timeout_s(a, False), "/health")
        if a.probe:
            for name in [model] + [m.name for m in (a.models or [])[1:]]:
                probe_mod.check_models(other, more, name, a.api_key_env, where="target.urls")
    own = await sut_mod.fetch_self_description(base_url, run.key, get_s)
    if a.probe:
        info = own.get("info") or (run.server.info if run.server is not None else None)
        context = fit_mod.check_context_fit(run.plan, run.sc.load, a.endpoint,
                                            models.get("models"), model, info)
        mt = a.extra_body.get("min_tokens")
        cfg = replace(ClientConfig.from_api(a, base_url, model, run.key), mix=None)  # api.models: the first
        res = await probe_mod.probe_request(
            cfg, a.drop_rejected_fields,
            mt if isinstance(mt, int) and not isinstance(mt, bool) else 1, ready)
        res.warnings[:0] = warnings
        res.context = context
        if res.warnings and res.status == "ok":
            res.status = "warning"
        drop, probe = tuple(res.dropped_fields), res.to_dict()
    else:
        drop, probe = (), {"status": "skipped", "warnings": warnings, "dropped_fields": [],
                           "ready": ready.describe()}
    warn = getattr(run.progress, "warn", None)
    for w in probe["warnings"]:
        if warn is not None:
            warn(w)
    sut = sut_mod.describe_sut(base_url, models,
                               run.server.describe() if run.server else None, model,
                               a.endpoint, own, accelerators=run.sc.target.accelerators)
    write_json(run.run_dir / "sut.json", sut)
    return TargetFacts(base_url, model, drop, probe, sut)
