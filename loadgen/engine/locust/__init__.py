"""The Locust engine: the same scenario, records and run directory, sent by Locust (gevent).
It owns what Locust is for (master/worker messages across machines, ``locust -f`` with its
web UI, users as the unit of concurrency); every rule is shared: the sender's
(loadgen.engine.core: partition, plan slice, SliceSender, stage gate, session driver, ledger,
journal, merge, clock-offset record), the request's (loadgen.client.request, stream_step) and
the HTTP/1.1 exchange's (loadgen.client.gevent_wire, the gevent driver of http1/exchange.py).

    loadgen CLI process (asyncio world; never imports gevent)                 run.py, cli.py
      a runner.Run (harness.py, _main: the native engine's steps) runs, as senders: ┐
      subprocesses in their own sessions:                                          │
        python -m loadgen.engine.locust.worker --role local | master (+ N x worker) │ worker.py
          Coordinator (coordinator.py): plan ─► ready ─► users ─► warm ─► go(t0) ─► done
          RequestSource (request_source.py), worker i of n: the gevent runtime of
            engine.core.sender.SliceSender(Plan(sc, i, n)) (sessions.py: of SessionPlayer)
            LLMUser (user.py) ─► gevent_wire.client.GWire ─► Record
            ─► ledger.py: records.worker-i.jsonl | .arrow, written when the hub idles (idle.py),
               + the send journal sent.worker-i.jsonl (remote workers forward both)
          ─► locust/master.json (t0, end, worker status done | dead, reports)
      engine.core.journal.merge_master: plan ∪ journal ─► owed ids ─► records.jsonl|.arrow, 1/id
        (a dead worker's unfinished requests "cancelled": "worker i died ...")
      Outcome(engine "locust") + Prepared ─► meta.json ─► summary.json, as the native engine

    locustfile.py: the same user and protocol for ``locust -f`` (web UI), LOADGEN_SCENARIO=path.

Request k of a phase belongs to worker k mod n, so each worker's share of a Poisson schedule
is Poisson and t0 is one instant for all (CLOCK_MONOTONIC on one host; a worker on another host
shifts its stamps onto the master's clock by an offset measured by ping-pong over Locust's
messages: clock.py, meta.json ``locust.clock``). Latencies are differences of one worker's own
stamps. Locust's own statistics only feed its UI (one request event per request, E2E).
May import: loadgen.client (request rules, stream step, balance, gevent_wire), loadgen.run
(senders; the CLI side also the runner's steps and engine.children, the processes' one
supervisor, --procs' too), loadgen.scenario, loadgen.record; the gevent
side never asyncio or aiohttp (tests/loadgen/engine/locust/test_locust.py checks it).
"""
