"""One Locust-engine run across simulated hosts (netns.Hosts): the calibration server and
``loadgen run --engine locust --master --workers K`` in the master's namespace, one
``loadgen run --engine locust --worker --master-host 10.77.0.1`` in each worker host (its own
network, CLOCK_MONOTONIC and hostname), each worker in its own directory (no shared run dir:
its records reach the master through Locust's messages, as from another machine).

    c = Cluster(hosts, tmp)            c.start_server(ttft_ms=, itl_ms=) ─► c.url
    c.scenario(load={...}) or c.write(tree) ─► path     c.start(path) ─► master + K workers
    c.wait(timeout_s) ─► master's exit code; c.run_dir, c.meta(), c.records(), c.server_log()
    c.locust_worker(i) ─► {"index", "pid", "host"} of harness worker i (its Locust index)
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import yaml

from bench.hosts.netns import MASTER_IP, Hosts

ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


class Cluster:
    def __init__(self, hosts: Hosts, workdir: Path):
        self.h, self.dir = hosts, Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.server: Optional[subprocess.Popen] = None
        self.port: Optional[int] = None
        self.master: Optional[subprocess.Popen] = None
        self.workers: list[subprocess.Popen] = []
        self.run_dir: Optional[Path] = None

    @property
    def url(self) -> str:
        return f"http://{MASTER_IP}:{self.port}"

    def start_server(self, ttft_ms: float = 20.0, itl_ms: float = 5.0,
                     timeout_s: float = 30.0) -> str:
        """The calibration server on the master's host (its clock is the master's)."""
        self.server = self.h.run(self.h.master, [
            sys.executable, "-m", "servers.calib", "--host", MASTER_IP, "--port", "0",
            "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)],
            stdout=subprocess.PIPE, text=True, cwd=ROOT, env=child_env())
        ready, _, _ = select.select([self.server.stdout], [], [], timeout_s)
        line = self.server.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            raise RuntimeError(f"calibration server did not start on {MASTER_IP}: {line!r}")
        self.port = int(line.split()[1])
        return self.url

    def server_log(self) -> list[dict]:
        """GET /calib/log from inside the master's host: per request its arrival (the master's
        CLOCK_MONOTONIC), each write's stamp, the prompt."""
        out = self.h.call(self.h.master, [sys.executable, "-c", (
            "import sys,urllib.request;sys.stdout.write(urllib.request.urlopen("
            f"'{self.url}/calib/log',timeout=30).read().decode())")])
        return json.loads(out)

    def scenario(self, load: dict, name: str = "hosts", output_tokens: int = 8,
                 **extra) -> Path:
        assert self.port is not None, "start_server first"
        tree = {"name": name, "target": {"url": self.url}, "api": {"model": "calib-model"},
                "workload": {"prompt_tokens": {"dist": "fixed", "value": 12},
                             "output_tokens": {"dist": "fixed", "value": output_tokens},
                             "seed": 5},
                "load": load, "output": {"dir": str(self.dir / "runs"), "run_name": name,
                                         "report": "none"}}
        tree.update(extra)
        return self.write(tree)

    def write(self, tree: dict) -> Path:
        """Scenario ``tree`` to a file (its target must be on the simulated hosts)."""
        host = tree["target"]["url"].split("//")[1].split(":")[0]
        if not self.h.owns(host):
            raise RuntimeError(f"{host} is not an address of the simulated hosts")
        p = self.dir / f"{tree['name']}.yaml"
        p.write_text(yaml.safe_dump(tree))
        self.run_dir = Path(tree["output"]["dir"]) / tree["output"]["run_name"]
        return p

    def start(self, scenario: Path) -> None:
        env = child_env()
        base = [sys.executable, "-m", "loadgen", "run", str(scenario), "--engine", "locust"]
        self.master = self.h.run(
            self.h.master, base + ["--master", "--workers", str(self.h.k), "--json"],
            cwd=self.dir, env=env, stdout=open(self.dir / "master.out", "w"),
            stderr=open(self.dir / "master.err", "w"))
        for i in range(self.h.k):
            d = self.dir / f"w{i}"
            d.mkdir(exist_ok=True)
            self.workers.append(self.h.run(
                self.h.worker(i), base + ["--worker", "--master-host", MASTER_IP],
                cwd=d, env=env, stdout=open(d / "out", "w"), stderr=open(d / "err", "w")))

    def wait(self, timeout_s: float) -> Optional[int]:
        """The master's exit code, or None if it ran past ``timeout_s`` (then it is killed)."""
        try:
            rc = self.master.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        for w in self.workers:
            try:
                w.wait(15)
            except subprocess.TimeoutExpired:
                w.kill()
        return rc

    def locust_worker(self, i: int, timeout_s: float = 120.0) -> Optional[dict]:
        """Harness worker ``i``'s Locust index, pid and hostname once it is ready (its
        worker-N.json, in its own directory), or None within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for f in (self.dir / f"w{i}").glob("loadgen-locust-worker-*/worker-*.json"):
                try:
                    return json.loads(f.read_text())
                except ValueError:
                    pass                       # mid-write
            time.sleep(0.05)
        return None

    def meta(self) -> dict:
        return json.loads((self.run_dir / "meta.json").read_text())

    def records(self) -> list[dict]:
        with open(self.run_dir / "records.jsonl") as f:
            return [json.loads(ln) for ln in f if ln.strip()]

    def master_state(self) -> dict:
        return json.loads((self.run_dir / "locust" / "master.json").read_text())

    def logs(self) -> str:
        """The master's and workers' stderr tails (for a failing assertion's message)."""
        out = []
        for f in [self.dir / "master.err", *sorted(self.dir.glob("w*/err"))]:
            if f.exists():
                out.append(f"--- {f.relative_to(self.dir)}\n" + f.read_text()[-1500:])
        return "\n".join(out)
