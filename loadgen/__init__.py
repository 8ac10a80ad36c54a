"""loadgen: the load-generation side (CLI, runner, client, power sampling).

    scenarios/*.yaml ─► scenario/ (strict pydantic; workload and schedule, seeded and pure)
        ─► run/runner.py ─► targets/ (start a managed server: servers.jax | servers.vllm | command;
        │                             sut.json; /metrics scraped to server_metrics.jsonl)
        │               ─► engine/aio/dispatch.py (offline | server open loop | closed loop)
        │                      └► client/ (aiohttp, SSE parser, every read stamped) ─► record.py
        │                         ─► records.jsonl, one Record per request, flushed as it ends
        │               ─► power/ (samplers ─► power.jsonl)
        │               ─► analysis/ (summary.json, report.html / report.md)
        ├► multirun/sweep.py: one run per load point, resumable; max rate under the SLO by bisection
        └► engine/locust/: the same scenario and records on Locust workers (a gevent world of its own)
    commands/: one module per CLI subcommand, wired by cli.py
    open_run(path): a finished run for notebooks (analysis.contract.open_run: typed meta, sut,
        summary; pandas records() and chunks()) — docs/notebooks.md

Imports run one way: loadgen uses analysis and servers; they never import loadgen
(tests/test_layering.py).
"""
__version__ = "0.1.0"


def open_run(path):
    """The run directory at ``path``: ``.meta``, ``.sut``, ``.summary`` (typed, analysis.contract)
    and pandas DataFrames ``.records()`` (one row per request) and ``.chunks()`` (one row per
    chunk), times in ms from the run's t0. See docs/notebooks.md."""
    from analysis.contract.open_run import open_run as _open   # lazy: `import loadgen` stays light
    return _open(path)
