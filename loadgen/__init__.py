"""loadgen: the load-generation side (CLI, runner, client, power sampling).

    scenarios/*.yaml ─► scenario.py (strict pydantic; defaults → YAML → --set) ─► runner.py
      runner.py ─► workload.py (prompts, lengths; seeded)  ─► schedule.py (arrival offsets; seeded)
                ─► managed.py / vllm.py (start, health-check, stop a server; its log; sut.json)
                ─► dispatch.py (offline | server open loop | closed loop; one record per request)
                      └► client.py (aiohttp; asyncio or uvloop via eventloop.py) + sse.py + request.py
                ─► record.py (Record ─► records.jsonl, flushed as each request ends)
                ─► clientload.py (is the client itself the bottleneck?)
                ─► power/ (samplers ─► power.jsonl)  ─► server_metrics.py (/metrics ─► jsonl)
                ─► rundir.py ─► analysis/ (summary.json, report.html / report.md)
      sweep.py: one run per load point, resumable; max rate under the SLO by bisection
      locust_engine/: the same scenario and records on Locust workers (a gevent world of its own)
      commands/: one module per CLI subcommand, wired by cli.py

Imports run one way: loadgen uses analysis and servers; they never import loadgen.
"""
__version__ = "0.1.0"
