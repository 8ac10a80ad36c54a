"""The reproducibility manifest of a run: what it takes to run the same measurement again.

    run_dir/scenario.yaml (resolved scenario) ─┐
    run_dir/meta.json (versions, workload)     ├─► manifest(run_dir) ─► dict ─► rows (report)
    run_dir/sut.json (server /info, host)      ┘

Items: tool version, scenario hash, dataset and tokenizer identity (SHA-256 of the files when they
are still where the run read them), seeds, server flags, hardware. ``scenario_sha256`` hashes the
resolved scenario as canonical JSON (sorted keys) WITHOUT its ``output`` section, so two runs of
one scenario into different directories hash alike; ``scenario_file_sha256`` is the file's own.
A missing item says why; nothing is filled in by guess.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional

from analysis.contract import RunMeta, Sut
from analysis.contract.meta import Workload
from analysis.contract.rundir import read_dict, read_json as contract_json, read_scenario
from analysis.contract.target import ClientHost

MANIFEST_VERSION = 1
CHUNK = 1 << 20


def read_json(path: Path) -> dict:
    """A run file as written, through analysis.contract ({} when absent or not JSON)."""
    return contract_json(path) or {}


def load_scenario_tree(run_dir: str | Path) -> dict:
    """The resolved scenario (scenario.yaml) as a dict; {} when absent or unreadable
    (analysis.contract.rundir.read_scenario)."""
    return read_scenario(run_dir)


def canonical_sha256(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"),
                                     default=str).encode()).hexdigest()


def file_sha256(path: str | Path) -> Optional[str]:
    """SHA-256 of a file, or None when it is not there (or is a directory)."""
    p = Path(path).expanduser()
    if not p.is_file():
        return None
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _identity(path: Optional[str], base: Path) -> dict:
    """{"path", "sha256", "status"} for a file a run read (relative paths tried from the run's
    parent directories too: a scenario may name them relative to where loadgen was started)."""
    if not path:
        return {"path": None, "sha256": None, "status": "no file"}
    cands = [Path(path)] + ([base / path, base.parent / path, base.parent.parent / path]
                            if not Path(path).is_absolute() else [])
    for c in cands:
        if c.is_dir() and (c / "tokenizer.json").is_file():
            c = c / "tokenizer.json"
        digest = file_sha256(c)
        if digest:
            return {"path": str(path), "sha256": digest, "status": f"hashed now (from {c})"}
    return {"path": str(path), "sha256": None,
            "status": "not hashed: the file is not reachable from here"}


def _schedule_seed(meta: RunMeta, sc: dict, wl_seed: Optional[int]) -> dict:
    """The arrival schedule's seed: meta.schedule_seed, else load.seed, else workload seed + 1
    (the runner's default)."""
    if meta.schedule_seed is not None:
        return {"schedule": meta.schedule_seed, "schedule_rule": "recorded (meta.json)"}
    if (sc.get("load") or {}).get("seed") is not None:
        return {"schedule": sc["load"]["seed"], "schedule_rule": "load.seed"}
    return {"schedule": None if wl_seed is None else wl_seed + 1,
            "schedule_rule": "workload seed + 1 (the runner's default)"}


def manifest(run_dir: str | Path) -> dict:
    """The manifest dict of one run directory."""
    d = Path(run_dir)
    has_sut = bool(read_dict(d, "sut.json"))
    meta = RunMeta.read(read_dict(d, "meta.json"))                 # through the models
    sut = Sut.read(read_dict(d, "sut.json"))
    sc = load_scenario_tree(d)                # the user's resolved scenario, as a tree
    wl_meta = meta.workload or Workload()
    wl_sc = sc.get("workload") or {}
    info = sut.server_info or {}              # the server's own /info, as it gave it
    managed = sut.managed_server
    host = sut.client_host
    packages = host.packages if host else {}
    seed = wl_sc.get("seed", wl_meta.seed)
    tok = wl_meta.tokenizer or wl_sc.get("tokenizer")
    src = wl_meta.source or wl_sc.get("source")
    sfile = d / "scenario.yaml"
    return {
        "manifest_version": MANIFEST_VERSION,
        "tool": {"loadgen": meta.loadgen_version or packages.get("loadgen"),
                 "python": host.python if host else None,
                 "packages": {k: v for k, v in packages.items() if v}},
        "scenario": {"name": sc.get("name") or meta.scenario,
                     "sha256": canonical_sha256({k: v for k, v in sc.items() if k != "output"})
                     if sc else None,
                     "file_sha256": file_sha256(sfile),
                     "status": "hashed" if sc else "no scenario.yaml in the run directory"},
        "dataset": {"source": src, **(_identity(wl_meta.path or wl_sc.get("path"), d)
                                      if src not in (None, "synthetic") else
                                      {"path": None, "sha256": None,
                                       "status": f"synthetic prompts, seed {seed}"}),
                    "prompts_in_file": wl_meta.file_prompts,
                    "token_count": wl_meta.token_count},
        "tokenizer": {"client": tok, **(_identity(tok, d) if tok not in (None, "words", "bytes")
                                        else {"sha256": None, "status": f"built-in ({tok})"
                                              if tok else "not recorded"}),
                      "server": info.get("tokenizer")},
        "seeds": {"workload": seed, **_schedule_seed(meta, sc, seed),
                  "server": (info.get("server") or {}).get("seed")},
        "server": {"kind": (managed.kind if managed else None)
                           or ("external" if has_sut else None),
                   "argv": managed.argv if managed else None, "settings": info.get("server"),
                   "target_url": sut.target_url or meta.target_url,
                   "weights": info.get("weights"),
                   "status": "recorded" if managed and managed.argv else
                   "argv not recorded" if managed else
                   "flags unknown: loadgen did not start this server" if has_sut else
                   "no sut.json"},
        "hardware": {"client_host": {"hostname": host.hostname, "cpu_count": host.cpu_count,
                                     "cpu_affinity": host.cpu_affinity,
                                     "memory_bytes": host.memory_bytes, "platform": host.platform,
                                     "machine": host.machine, "processor": host.processor}
                     if host else None,
                     "server_device": {k: info.get(k) for k in (
                         "device_kind", "device_count", "backend")} if info else None,
                     "power_sources": [s.get("name") if isinstance(s, dict) else s
                                       for s in meta.power_sources or []]},
    }



def _host(raw: dict) -> str:
    if not raw:
        return "not recorded"
    h = ClientHost.read(raw)
    parts = [f"{h.cpu_affinity} usable CPUs" if h.cpu_affinity else None,
             f"of {h.cpu_count}" if h.cpu_count else None,
             f"{h.memory_bytes / 2**30:.1f} GiB" if h.memory_bytes else None,
             h.platform, h.processor]
    return f"{h.hostname or 'unnamed host'} (" + ", ".join(p for p in parts if p) + ")"


def manifest_rows(man: dict) -> list[list[str]]:
    """[item, value, evidence] rows for the report."""
    t, s, ds, tk = man["tool"], man["scenario"], man["dataset"], man["tokenizer"]
    sd, sv, hw = man["seeds"], man["server"], man["hardware"]
    pk = ", ".join(f"{k} {v}" for k, v in t["packages"].items()
                   if k != "loadgen") or "not recorded"      # loadgen leads the row already
    host = hw["client_host"] or {}
    dev = hw["server_device"] or {}
    rows = [
        ["tool version", f"loadgen {t['loadgen'] or 'not recorded'}; python "
                         f"{t['python'] or 'not recorded'}; {pk}", "recorded"],
        ["scenario hash", f"sha256 {s['sha256'] or 'n/a'} (without output section); file "
                          f"{s['file_sha256'] or 'n/a'}; {s['status']}", "calculated"],
        ["dataset", f"{ds['source'] or 'not recorded'}; path {ds['path'] or '-'}; sha256 "
                    f"{ds['sha256'] or '-'}; {ds['status']}", "calculated" if ds["sha256"]
         else "recorded"],
        ["tokenizer", f"client {tk['client'] or 'not recorded'} (sha256 {tk['sha256'] or '-'}; "
                      f"{tk['status']}); server {tk['server'] or 'not recorded'}", "recorded"],
        ["seeds", f"workload {sd['workload']}, schedule {sd['schedule']} "
                  f"({sd['schedule_rule']}), server "
                  + (str(sd["server"]) if sd["server"] is not None else
                     "not recorded (the server published no seed)"), "recorded"],
        ["server flags", f"{sv['kind'] or 'n/a'}: "
                         + (" ".join(map(str, sv["argv"])) if sv["argv"] else sv["status"])
                         + (f"; settings {sv['settings']}" if sv["settings"] else ""),
         "recorded" if sv["argv"] else "unmeasured"],
        ["hardware", f"client {_host(host)}; server device "
                     + (f"{dev['device_kind']} x{dev['device_count']} "
                        f"({dev['backend']})" if dev else "not recorded (no /info)")
                     + f"; power sources {', '.join(map(str, hw['power_sources'])) or 'none'}",
         "recorded"],
    ]
    return rows
