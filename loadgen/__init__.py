"""loadgen: the load-generation side (CLI, runner, client, power sampling).

    scenarios/*.yaml ─► scenario.py (strict pydantic) ─► runner.py
        runner.py ─► workload.py (prompts, lengths; seeded)  ─► schedule.py (arrival times; seeded)
                  ─► managed.py (start/health/stop a server from servers/) ─► client.py + sse.py
                  ─► record.py (one Record per request ─► records.jsonl, flushed per request)
                  ─► power/ (samplers ─► power.jsonl)   ─► analysis/ (summary.json, report)

Imports run one way: loadgen uses analysis and servers; they never import loadgen.
"""
__version__ = "0.1.0"
