"""deploy/k8s: the manifests parse, fit together (Service ─► master pod, workers ─► Service, the
ConfigMap's scenario mounted where the commands read it) and every command they run is a valid
``loadgen`` command line by loadgen's own parser and flag rules; the scenario loads. No cluster
is needed (none is available here): this is what CI can check of a deployment."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from loadgen.cli import build_parser
from loadgen.run.engines import check_flags, refusal
from loadgen.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"


def _docs() -> dict[str, dict]:
    out = {}
    for f in sorted(K8S.glob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if d:
                out[f"{d['kind']}/{d['metadata']['name']}"] = d
    return out


def _pod(d: dict) -> dict:
    return d["spec"]["template"]["spec"]


def _containers() -> list[tuple[str, dict, dict]]:
    return [(k, d, c) for k, d in _docs().items() if d["kind"] in ("Job", "Deployment")
            for c in _pod(d)["containers"]]


def test_the_manifests_are_the_expected_kinds():
    assert set(_docs()) == {"ConfigMap/loadgen-scenario", "Job/loadgen-master",
                            "Service/loadgen-master", "Deployment/loadgen-worker",
                            "PersistentVolumeClaim/loadgen-results"}
    assert (ROOT / "deploy" / "Dockerfile").read_text().count("ENTRYPOINT") == 1


@pytest.mark.parametrize("name", ["Job/loadgen-master", "Deployment/loadgen-worker"])
def test_each_command_is_a_valid_loadgen_command_line(name, tmp_path):
    docs = _docs()
    (c,) = _pod(docs[name])["containers"]
    argv = c["command"] + c.get("args", [])
    assert argv[0] == "loadgen"
    args = build_parser().parse_args(argv[1:])          # argparse exits 2 on a bad flag
    assert args.command == "run" and args.engine == "locust"
    assert check_flags(args.engine, args.workers, args.master, args.worker,
                       args.master_host) is None
    # the scenario file it names is the ConfigMap's key, mounted at that path
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in _pod(docs[name])["volumes"]}
    path = Path(args.scenario)
    cm = vols[mounts[str(path.parent)]]["configMap"]["name"]
    text = docs[f"ConfigMap/{cm}"]["data"][path.name]
    f = tmp_path / path.name
    f.write_text(text)
    sc = load_scenario(str(f), args.overrides)
    assert refusal(args.engine, sc, args.repeat, args.master, args.worker) is None
    if args.master:           # its run directory goes to the results volume
        assert any(sc.output.dir.startswith(m) for m, v in mounts.items()
                   if "persistentVolumeClaim" in vols[v])


def test_workers_dial_the_masters_service_and_the_service_selects_the_master():
    docs = _docs()
    svc = docs["Service/loadgen-master"]
    master = docs["Job/loadgen-master"]
    worker = docs["Deployment/loadgen-worker"]
    labels = master["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    p = build_parser()
    m_args = p.parse_args(_pod(master)["containers"][0]["command"][1:])
    w_args = p.parse_args(_pod(worker)["containers"][0]["command"][1:])
    assert w_args.master_host == svc["metadata"]["name"]
    port = svc["spec"]["ports"][0]
    assert w_args.master_port == port["port"] and m_args.master_port == port["targetPort"]
    assert m_args.workers == worker["spec"]["replicas"]     # the master waits for all of them
    assert worker["spec"]["selector"]["matchLabels"].items() <= \
        worker["spec"]["template"]["metadata"]["labels"].items()
    assert not (worker["spec"]["selector"]["matchLabels"].items()
                <= labels.items()), "the Service must not select the workers"
