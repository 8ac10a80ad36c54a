"""What each engine runs: ONE rule, asked by ``loadgen run`` before either engine starts (and by
the Locust engine's API entry, run_locust), so a refusal reads the same whatever path got there.

    refusal(engine, sc, repeat=, master=, worker=) ─► one line naming the field or flag, or None
        load.probe   the probe stream: native engine only (its own client and probe_stream.jsonl
                     beside the load; the Locust users are all the load's)
        --repeat N   both engines; on Locust with local workers only (--master / --worker join
                     one run across machines: repeat it by running the command again)
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
    return None
