"""``loadgen run --metrics-port P [--metrics-host H]``: the flags, checked, and the runs wired.

    args ─► open_live(args) ─► None (no --metrics-port) | LiveExporter (process.py) | ScenarioError
            one line naming the flag (exit 2): not a port number, the port in use or not
            permitted, a host that does not resolve, --worker (the master's side serves it)
    open_live's exporter + scenario ─► run_live(live, sc, progress): runner.Run built (its run
            directory known), live.follow(run_dir, progress), then the run as run_scenario runs it
    --engine locust: engine/locust/cli.run_from_cli does the same with its LocustRun (the
            exporter follows the workers' ledgers, locust/records.worker-i.jsonl, and the
            progress that the CLI process already feeds from those files: nothing is added
            to the Locust workers' gevent processes)

The port is a property of this invocation on this host, not of the experiment (like
``--master-port``), so it has no scenario key.
"""
from __future__ import annotations

from typing import Optional

from loadgen.live.process import LiveError, LiveExporter
from loadgen.scenario.model import ScenarioError

DEFAULT_HOST = "127.0.0.1"


def add_flags(p, what: str = "the run goes") -> None:
    """``--metrics-port P`` and ``--metrics-host H`` on an argparse parser (run, sweep)."""
    p.add_argument("--metrics-port", default=None, metavar="P",
                   help=f"serve live Prometheus metrics on http://127.0.0.1:P/metrics while "
                        f"{what} (docs/live-metrics.md)")
    p.add_argument("--metrics-host", default=None, metavar="H",
                   help="the address --metrics-port listens on (default 127.0.0.1)")


def parse_port(text) -> int:
    """``--metrics-port`` as a port number from 1 to 65535 (else a one-line ScenarioError)."""
    s = str(text).strip()
    if not (s.isdigit() and s.isascii() and 1 <= int(s) <= 65535):
        raise ScenarioError(f"--metrics-port {text}: a port number from 1 to 65535")
    return int(s)


def open_live(args) -> Optional[LiveExporter]:
    """The exporter for ``loadgen run``'s flags (serving from now until ``close()``), or None."""
    port_text = getattr(args, "metrics_port", None)
    host = getattr(args, "metrics_host", None)
    if port_text is None:
        if host is not None:
            raise ScenarioError("--metrics-host needs --metrics-port P")
        return None
    port = parse_port(port_text)
    if getattr(args, "worker", False):
        raise ScenarioError("--metrics-port: give it to the master's side (--master or a local "
                            "--engine locust run), not to --worker")
    try:
        return LiveExporter.open(port, host or DEFAULT_HOST)
    except LiveError as e:
        raise ScenarioError(f"--metrics-port {port}: {e}") from None


def run_live(live: Optional[LiveExporter], sc, progress, server=None):
    """``runner.run_scenario(sc, progress, server)``, its records and live counters served by
    ``live`` while it runs (``live`` None: exactly run_scenario)."""
    from loadgen.run.runner import Run, run_scenario
    if live is None:
        return run_scenario(sc, progress, server)
    run = Run(sc, progress, server)
    live.follow(run.run_dir, run.progress)
    return run.execute()
