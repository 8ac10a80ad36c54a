"""Every bound a scenario's numbers must meet before anything starts (docs/limits.md lists them).

    Strict (every scenario model) ─► allow_inf_nan=False (no .inf / .nan anywhere)
                                 ─► no_bool(): true/false is not a number (concurrency: true refused)
                                 ─► at_most(): UPPER[(model, field)], a range this machine can run
    Load ─► check_plan(): a planned run (offline, server, trace) holds every request before t0
    Output.run_name ─► check_run_name(): stays inside output.dir; parts ≤ MAX_NAME_BYTES
    Scenario.name ─► check_name(): ≤ MAX_NAME_BYTES (the run directory's default name holds it)
    trace / sessions files ─► MAX_TOKENS, MAX_PROMPT_CHARS, MAX_FILE_ROWS per line

A number over its bound is one line naming the field (``load.duration_s: must be at most 604,800
(7 days; docs/limits.md)``) and exit 2. Pure: no I/O.
"""
from __future__ import annotations

from pathlib import PurePath
from typing import Any, Union, get_args, get_origin

DAY_S = 86_400.0
MAX_TIMEOUT_S = DAY_S                 # api.timeout_s, api.connect_timeout_s, drain, startup
MAX_DURATION_S = 7 * DAY_S            # load.duration_s, stage durations, a trace's span
MAX_RATE = 1_000_000.0                # requests (or sessions) per second
MAX_CONCURRENCY = 100_000             # users / requests in flight
MAX_PLANNED_REQUESTS = 1_000_000      # offline / server / trace: built before t0, one record each
MAX_CLOSED_REQUESTS = 10 ** 15        # closed loop: drawn as users free up; the unsent rest a count
MAX_TOKENS = 1_048_576                # any prompt or output length, in tokens
MAX_PROMPT_CHARS = 16 * MAX_TOKENS    # a prompt given as text (trace / jsonl row)
MAX_FILE_ROWS = MAX_PLANNED_REQUESTS  # rows of a trace file
MAX_LINE_BYTES = 128 << 20            # one line of a JSONL file (a prompt's JSON), refused unread
MAX_GRADED_CHARS = 65_536             # workload.dataset: a longer answer is not graded (null)
MAX_SEED = 2 ** 63 - 1
MAX_SCENARIO_VALUES = 100_000         # values in the YAML tree after aliases are expanded
MAX_SCENARIO_DEPTH = 64               # nesting of the YAML tree

_WHY = {MAX_TIMEOUT_S: "1 day", MAX_DURATION_S: "7 days"}

# (model class name, field) ─► the largest value that can run. Lower bounds live on the fields.
UPPER: dict[tuple[str, str], float] = {
    ("Api", "timeout_s"): MAX_TIMEOUT_S,
    ("Api", "connect_timeout_s"): MAX_TIMEOUT_S,
    ("Dist", "value"): MAX_TOKENS, ("Dist", "min"): MAX_TOKENS, ("Dist", "max"): MAX_TOKENS,
    ("Dist", "mean"): MAX_TOKENS, ("Dist", "std"): MAX_TOKENS,
    ("Seconds", "value"): MAX_TIMEOUT_S, ("Seconds", "min"): MAX_TIMEOUT_S,
    ("Seconds", "max"): MAX_TIMEOUT_S, ("Seconds", "mean"): MAX_TIMEOUT_S,
    ("Prefix", "groups"): 100_000, ("Prefix", "tokens"): MAX_TOKENS, ("Prefix", "zipf_s"): 100.0,
    ("Workload", "block_tokens"): MAX_TOKENS, ("Workload", "shared_prefix_tokens"): MAX_TOKENS,
    ("Workload", "seed"): MAX_SEED,
    ("Stage", "rate"): MAX_RATE, ("Stage", "concurrency"): MAX_CONCURRENCY,
    ("Stage", "duration_s"): MAX_DURATION_S,
    ("Load", "rate"): MAX_RATE, ("Load", "time_scale"): 1_000_000.0,
    ("Load", "burstiness"): 1_000_000.0,
    ("Load", "concurrency"): MAX_CONCURRENCY, ("Load", "max_concurrency"): MAX_CONCURRENCY,
    ("Load", "num_requests"): MAX_CLOSED_REQUESTS, ("Load", "duration_s"): MAX_DURATION_S,
    ("Load", "warmup_requests"): MAX_PLANNED_REQUESTS, ("Load", "min_duration_s"): MAX_DURATION_S,
    ("Load", "min_queries"): MAX_CLOSED_REQUESTS, ("Load", "drain_timeout_s"): MAX_TIMEOUT_S,
    ("Load", "seed"): MAX_SEED,
    ("Slo", "ttft_ms"): MAX_TIMEOUT_S * 1e3, ("Slo", "tpot_ms"): MAX_TIMEOUT_S * 1e3,
    ("Slo", "itl_ms"): MAX_TIMEOUT_S * 1e3, ("Slo", "e2el_ms"): MAX_TIMEOUT_S * 1e3,
    ("Slo", "max_schedule_lag_ms"): MAX_TIMEOUT_S * 1e3,
    ("Power", "sample_hz"): 10_000.0, ("Power", "idle_baseline_s"): MAX_TIMEOUT_S,
    ("Power", "estimate_watts"): 1e7, ("Power", "estimate_tdp_w"): 1e7,
    ("Sweep", "rate_low"): MAX_RATE, ("Sweep", "rate_high"): MAX_RATE,
    ("Sweep", "tolerance"): 1.0, ("Sweep", "max_probes"): 1_000,
    ("Sweep", "concurrency_low"): MAX_CONCURRENCY, ("Sweep", "concurrency_high"): MAX_CONCURRENCY,
    ("Target", "accelerators"): MAX_CONCURRENCY,
    ("ServerSpec", "startup_timeout_s"): MAX_TIMEOUT_S,
    ("ServerSpec", "slots"): MAX_CONCURRENCY, ("ServerSpec", "max_model_len"): MAX_TOKENS * 16,
    ("ServerSpec", "max_queue"): MAX_CLOSED_REQUESTS,
    ("ServerSpec", "interleave_chunk"): MAX_TOKENS,
    ("Target", "metrics_interval_s"): MAX_TIMEOUT_S,
}


def _numeric(annotation: Any) -> bool:
    """int/float (or Optional of one, or a list of them), and not bool."""
    if annotation in (int, float):
        return True
    origin = get_origin(annotation)
    if origin is Union or origin is list:
        args = [a for a in get_args(annotation) if a is not type(None)]
        return bool(args) and bool not in args and all(_numeric(a) for a in args)
    return False


def no_bool(model_cls, name: str, value: Any) -> Any:
    """A YAML true/false given where a number belongs is an error, not 1 or 0."""
    field = model_cls.model_fields.get(name)
    if field is not None and _numeric(field.annotation):
        items = value if isinstance(value, list) else [value]
        if any(isinstance(v, bool) for v in items):
            raise ValueError("must be a number, not true/false")
    return value


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def at_most(model_cls, name: str, value: Any) -> Any:
    hi = UPPER.get((model_cls.__name__, name))
    if hi is not None and isinstance(value, (int, float)) and value > hi:
        why = _WHY.get(hi)
        raise ValueError(f"must be at most {_fmt(hi)}{f' ({why})' if why else ''}, "
                         "the limit in docs/limits.md")
    return value


def planned_count(load) -> float:
    """How many measured requests a planned run would build before t0 (an upper estimate for a
    duration-bounded open loop: rate × duration)."""
    n = load.num_requests
    if load.mode == "server":
        if load.stages:
            by_time = sum(s.rate * s.duration_s for s in load.stages)
        else:
            by_time = load.rate * load.duration_s if load.duration_s is not None else None
        if by_time is not None:
            n = by_time if n is None else min(n, by_time)
    return n or 0


def check_plan(load) -> None:
    """Offline, server and trace runs build every request (prompt included) before t0 and write
    one record each even when interrupted: at most MAX_PLANNED_REQUESTS. A closed loop
    (mode concurrency) draws its requests as users free up: num_requests up to
    MAX_CLOSED_REQUESTS, its never-started remainder a count (``unsent_requests``)."""
    if load.mode == "concurrency":
        return
    n = planned_count(load)
    if n > MAX_PLANNED_REQUESTS:
        what = ("num_requests" if load.num_requests is not None and n == load.num_requests
                else "rate × duration_s")
        raise ValueError(f"{what} plans {_fmt(round(n))} requests; a {load.mode} run builds every "
                         f"request before it starts: at most {_fmt(MAX_PLANNED_REQUESTS)} "
                         "(docs/limits.md; load.mode concurrency has no such limit)")


MAX_NAME_BYTES = 200          # output.run_name's parts and the scenario's name (+ "-x3", a time)
MAX_RUN_NAME_BYTES = 1024     # output.run_name as a whole (a path of such parts)


def check_name(name: str) -> str:
    """The scenario's ``name``: a run directory's default name is ``{time}-{name}``, so it must
    fit one file name (NAME_MAX 255 bytes, with room for the time and a suffix)."""
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise ValueError(f"at most {MAX_NAME_BYTES} bytes (it names the run directory; "
                         "docs/limits.md)")
    return name


def check_run_name(name):
    """``output.run_name`` is a relative path that stays inside ``output.dir``, each part of it
    one file name the file system takes (at most MAX_NAME_BYTES bytes)."""
    if name is None:
        return name
    p = PurePath(name)
    if not name.strip() or "\0" in name:
        raise ValueError("must be a non-empty name")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_RUN_NAME_BYTES or any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
                                        for part in p.parts):
        raise ValueError(f"{size} bytes: each part of the name at most {MAX_NAME_BYTES} bytes, "
                         f"the whole at most {MAX_RUN_NAME_BYTES} (docs/limits.md)")
    if p.is_absolute() or name.startswith(("/", "\\", "~")):
        raise ValueError(f"'{name}' is an absolute path: give a name inside output.dir")
    if ".." in p.parts or ".." in name.replace("\\", "/").split("/"):
        raise ValueError(f"'{name}' leaves output.dir ('..'): give a name inside it")
    return name
