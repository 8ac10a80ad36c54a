"""loadgen: the load-generation side (CLI, runner, client, power sampling).

    scenarios/*.yaml ─► scenario/ (strict pydantic; workload and schedule, seeded and pure)
        ─► run/runner.py ─► targets/ (start a managed server: servers.jax | servers.vllm | command;
        │                             sut.json; /metrics scraped to server_metrics.jsonl)
        │               ─► run/dispatch.py (offline | server open loop | closed loop)
        │                      └► client/ (aiohttp, SSE parser, every read stamped) ─► record.py
        │                         ─► records.jsonl, one Record per request, flushed as it ends
        │               ─► power/ (samplers ─► power.jsonl)
        │               ─► analysis/ (summary.json, report.html / report.md)
        ├► run/sweep.py: one run per load point, resumable; max rate under the SLO by bisection
        └► locust_engine/: the same scenario and records on Locust workers (a gevent world of its own)
    commands/: one module per CLI subcommand, wired by cli.py

Imports run one way: loadgen uses analysis and servers; they never import loadgen
(tests/test_layering.py).
"""
__version__ = "0.1.0"
