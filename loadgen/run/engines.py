"""What each engine runs: ONE rule, asked by ``loadgen run`` before either engine starts (and by
the Locust engine's API entry, run_locust), so a refusal reads the same whatever path got there.

    refusal(engine, sc, repeat=, master=, worker=) ─► one line naming the field or flag, or None
        load.probe   the probe stream: native engine only (its own client and probe_stream.jsonl
                     beside the load; the Locust users are all the load's)
        --repeat N   both engines; on Locust with local workers only (--master / --worker join
                     one run across machines: repeat it by running the command again)
        https://     native engine only: the Locust users' client (loadgen.client.gevent_wire)
                     speaks plain http:// (target.url / target.urls)
    check_flags(engine, workers, master, worker, master_host)   --workers / --master / --worker
                     / --master-host: Locust only, and which combinations work
    workers_error(sc, users, workers)   each Locust worker needs a user (and, for a closed
                     loop's num_requests, an equal share of them)
Pure: no engine is imported here.
"""
from __future__ import annotations

from typing import Optional

ENGINES = ("native", "locust")


def refusal(engine: str, sc, repeat: int = 1, master: bool = False,
            worker: bool = False) -> Optional[str]:
    if engine not in ENGINES:
        return f"--engine {engine}: expected one of {', '.join(ENGINES)}"
    if repeat < 1:
        return f"--repeat {repeat}: must be at least 1"
    if engine == "locust":
        if sc is not None and sc.load.probe is not None:
            return "load.probe: the probe stream runs in the native engine only"
        if repeat > 1 and (master or worker):
            return ("--repeat: with --engine locust, local workers only (not --master / "
                    "--worker)")
        tls = _https(sc)
        if tls is not None:
            return (f"{tls[0]}: {tls[1]}: the Locust engine speaks plain http:// only "
                    "(use --engine native for an https:// target)")
    return None


def _https(sc) -> Optional[tuple]:
    """(field, url) of the first https:// target URL, or None."""
    tg = getattr(sc, "target", None) if sc is not None else None
    if tg is None:
        return None
    for field, urls in (("target.url", [tg.url]), ("target.urls", tg.urls or [])):
        for u in urls:
            if u is not None and u.lower().startswith("https://"):
                return field, u
    return None


def check_flags(engine: str, workers, master: bool, worker: bool, master_host) -> Optional[str]:
    """A one-line error for a flag combination that cannot work, else None."""
    if engine != "locust":
        for name, v in (("--workers", workers), ("--master", master), ("--worker", worker),
                        ("--master-host", master_host)):
            if v:
                return f"{name} needs --engine locust"
        return None
    if master and worker:
        return "--master and --worker exclude each other"
    if worker and not master_host:
        return "--worker needs --master-host H (the machine running --master)"
    if master_host and not worker:
        return "--master-host applies to --worker only"
    if worker and workers is not None:
        return "--workers applies to the master side, not to --worker"
    if master and not workers:
        return "--master needs --workers N (how many workers will connect)"
    if workers is not None and workers < 1:
        return "--workers must be >= 1"
    return None


def workers_error(sc, users: int, workers: Optional[int]) -> Optional[str]:
    """``users`` Locust users (engine.core.plan.users_for) over ``workers``: a one-line error."""
    ld = sc.load
    if workers and users < workers:
        field = "load.concurrency" if ld.closed_loop else "load.max_concurrency"
        return (f"{field}: {users} user(s) cannot keep --workers {workers} "
                "busy (each worker needs at least one Locust user)")
    if workers and ld.unsent_counted and not ld.stages and users % workers:
        return (f"load.concurrency: {users} is not a multiple of --workers "
                f"{workers} (each worker owns an equal share of "
                "num_requests; uneven users would end the run at lower "
                "concurrency)")
    return None
