"""aio: the asyncio driver of the one scheduler (engine/core/), in one process or a --procs child.

    specs (a list, or planned.Planned: built one at a time as they are sent)
      ─► dispatch.Dispatcher.measure (pacing: core/pacing.pacing_for) ─► sleep_until ─► send
             ─► loadgen.client.Client (wire / aiohttp) ─► Record ─► core/ledger.Ledger
      ─► sessions.py      the asyncio runtime of core/sessions.SessionPlayer (turns, think time)
      ─► probe_stream.py  load.probe: a light side stream beside the load ─► probe_stream.jsonl

Only waits and sends: every decision is core/'s. May import asyncio, loadgen.engine.core,
loadgen.client, loadgen.scenario, loadgen.record; never gevent, locust, loadgen.run,
loadgen.multirun or loadgen.console (tests/test_layering.py).
"""
