"""loadgen.engine.core.plan: the slices of every sender together are the one-process run's
requests (a --procs child and a Locust worker build theirs with Plan(sc, k, n))."""
import itertools
import json

import pytest

from loadgen.engine.core.plan import Plan
from loadgen.scenario.loader import scenario_from_dict


def _sc(tmp_path, workload, load):
    return scenario_from_dict({
        "name": "t", "target": {"url": "http://127.0.0.1:1"},
        "workload": {"tokenizer": "bytes", **workload}, "load": load,
        "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}})


def _one_process(plan, sc):
    """(id, phase, prompt, max_tokens) as runner.Run._main builds them for one process."""
    ld, w, wl = sc.load, sc.load.warmup_requests, plan.workload
    stream = iter(wl)
    warm = wl.warmup_specs() if ld.mode == "trace" else stream
    out = [(i, "warmup", p.prompt, p.max_tokens) for i, p in zip(range(w), warm)]
    return out + [(w + i, "measured", p.prompt, p.max_tokens)
                  for i, p in zip(range(plan.count), stream)]


def _trace(tmp_path):
    rows = [{"timestamp": 1000 + 100 * i, "input_length": 10 + i, "output_length": 2 + i,
             "hash_ids": [i, i + 1]} for i in range(6)]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"source": "trace", "path": str(path), "block_tokens": 8}


@pytest.mark.parametrize("case", ["trace", "server", "offline"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_slices_together_are_the_one_process_plan(tmp_path, case, n):
    fixed = {"prompt_tokens": {"dist": "uniform", "min": 4, "max": 40},
             "output_tokens": {"dist": "uniform", "min": 2, "max": 9}}
    workload, load = {
        "trace": (_trace(tmp_path), {"mode": "trace", "num_requests": 6, "warmup_requests": 2}),
        "server": (fixed, {"mode": "server", "rate": 50, "num_requests": 7,
                           "warmup_requests": 3}),
        "offline": (fixed, {"mode": "offline", "num_requests": 5, "warmup_requests": 2}),
    }[case]
    sc = _sc(tmp_path, workload, load)
    want = _one_process(Plan(sc), sc)
    got = sorted(itertools.chain.from_iterable(
        [(s.id, s.phase, s.prompt, s.max_tokens)
         for s in itertools.chain(p.warm_specs(), p.measured_specs())]
        for p in (Plan(sc, k, n) for k in range(n))))
    assert got == want
