"""``python -m loadgen.engine.locust.worker --role local|master|worker``: one Locust process
(gevent-patched first thing; nothing asyncio). local: LocalRunner + Coordinator + RequestSource
0 of 1; master: MasterRunner + Coordinator for --workers N; worker: WorkerRunner +
RequestSource for its Locust index (--forward: records also sent to a master on another host;
``loadgen run --worker --master-host H`` starts this). Exit: 0 done, 1 run error, 2 bad scenario.
"""
from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Optional  # noqa: E402
from urllib.parse import urlparse  # noqa: E402

import gevent  # noqa: E402


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m loadgen.engine.locust.worker")
    ap.add_argument("--role", choices=["local", "master", "worker"], required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--run-dir", help="local/master: master.json and records go here")
    ap.add_argument("--records-dir", help="worker: its records files go here")
    ap.add_argument("--base-url")
    ap.add_argument("--model")
    ap.add_argument("--drop-field", action="append", default=[],
                    help="a request field the target rejected (the probe found it): not sent")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--master-host", default="127.0.0.1")
    ap.add_argument("--master-port", type=int, default=5557)
    ap.add_argument("--bind-host", default="127.0.0.1")
    ap.add_argument("--forward", action="store_true",
                    help="worker: also send records to the master (no shared run directory)")
    ap.add_argument("--connect-timeout", type=float, default=60.0)
    return ap.parse_args(argv)


class WorkerHandler:
    """The worker role's side of the protocol (messages from the Coordinator)."""

    def __init__(self, env, sc, args, api_key):
        self.env, self.sc, self.args, self.key = env, sc, args, api_key
        self.node = None
        self._planned = None                 # run_seq of the plan taken
        r = env.runner
        from loadgen.engine.locust.clock import Pinger
        self.pinger = Pinger(r, self.send)       # the clock offset to the master (clock.py)
        r.register_message("loadgen_plan", self.on_plan)
        for t in ("loadgen_warm", "loadgen_go", "loadgen_stop"):   # RequestSource.on_message
            r.register_message(t, lambda environment, msg, t=t, **kw: self.node and
                               self.node.on_message(t, msg.data or {}))

    def send(self, t: str, data: dict) -> None:
        self.env.runner.send_message(t, data)

    def on_plan(self, environment, msg, **kw) -> None:
        seq = (msg.data or {}).get("run_seq", 1)
        if self._planned == seq:             # the master re-sends the plan until all are ready
            return
        self._planned = seq                  # (a later run_seq: a new test start, planned anew)
        gevent.spawn(self._plan, msg.data)

    def _plan(self, data: dict) -> None:
        from loadgen.engine.core.clock import boot_id, estimate_from, ns_id, same_network
        from loadgen.engine.locust.request_source import RequestSource
        from loadgen.engine.core.plan import digest
        index, n = self.env.runner.worker_index, data["n_workers"]
        try:
            if data["digest"] != digest(self.sc):
                raise ValueError("this worker's scenario (workload/load) differs from the "
                                 "master's: give both the same file and --set overrides")
            host = urlparse(data["base_url"]).hostname
            if host in LOOPBACK and not same_network(data["clock"]):   # another loopback
                raise ValueError(f"the target {data['base_url']} is a loopback address on the "
                                 "master's machine: give target.url an address workers reach")
            d = Path(self.args.records_dir or self.args.run_dir or "loadgen-locust-worker")
            if data.get("run_seq", 1) > 1:       # locust -f: a later test start in one process
                d = d / f"run-{data['run_seq']}"
            est = estimate_from(data["clock"], self.pinger.measure())   # Plan checks index
            self.node = RequestSource(self.sc, index, n, dict(data, clock_estimate=est), d,
                                   self.send, self.args.forward, self.key,
                                   lambda: self.env.runner.user_count)
            me = {"index": index, "pid": os.getpid(), "host": socket.gethostname(),
                  "boot_id": boot_id(), "pid_ns": ns_id("pid")}    # whose pid: coordinator
            (d / f"worker-{index}.json").write_text(json.dumps(me))   # run.py: whose pid
            self.send("loadgen_ready", me)
        except Exception as e:
            self.send("loadgen_error", {"error": f"{type(e).__name__}: {e}"})

    def terminate(self) -> None:
        if self.node is not None:
            self.node.interrupt("worker stopped (SIGTERM) before the request ended")
        gevent.spawn_later(0.5, self.env.runner.quit)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # users are spawned at once on purpose (they wait for t0): not a ramp-up to warn about
    logging.getLogger("locust.runners").addFilter(
        lambda r: "spawn rate is very high" not in r.getMessage())
    from locust.env import Environment

    from loadgen.engine.locust import user as user_mod
    from loadgen.engine.locust.coordinator import Coordinator
    from loadgen.scenario.model import ScenarioError
    from loadgen.scenario.loader import load_scenario
    from loadgen.run.rundir import api_key
    try:
        sc = load_scenario(args.scenario, args.overrides)
        key = api_key(sc)              # the key, and every secret registered for redaction
    except ScenarioError as e:
        print(f"loadgen: error: {e}", file=sys.stderr)
        return 2
    env = Environment(user_classes=[user_mod.LLMUser], host=args.base_url or "http://127.0.0.1")
    if args.role == "worker":
        env.create_worker_runner(args.master_host, args.master_port)
        handler = WorkerHandler(env, sc, args, key)
        gevent.signal_handler(signal.SIGTERM, handler.terminate)
        gevent.signal_handler(signal.SIGINT, handler.terminate)
        env.runner.greenlet.join()
        return 0
    local = args.role == "local"
    if local:
        env.create_local_runner()
    else:
        env.create_master_runner(args.bind_host, args.master_port)
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    coord = Coordinator(env, sc, 1 if local else args.workers,
                        {"base_url": args.base_url, "model": args.model,
                         "drop_fields": list(args.drop_field)}, run_dir,
                        args.connect_timeout, key, local=local)
    coord.register()
    gevent.signal_handler(signal.SIGTERM, coord.interrupt)
    gevent.signal_handler(signal.SIGINT, coord.interrupt)
    gevent.spawn(coord.run)
    coord.finished.wait()
    env.runner.quit()
    return 1 if coord.state["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
