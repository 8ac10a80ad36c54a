"""engine: how a run's requests are sent — the one set of sender rules and its drivers.

    runner.Run (loadgen/run/: the run dir, target, power, meta.json around the load)
      └─► load phase ─► core/    THE sender's rules, sans I/O: plan slice, pacing (the one
                                 scheduler), partition, stages, sessions, ledger, merge, clock
                         ├─► aio/     the asyncio driver: Dispatcher (one process, or each
                         │            --procs child's slice), sessions, planned, probe stream
                         │              └─► loadgen.client (asyncio transports) ─► Records
                         ├─► procs/   --procs N: N children (python -m loadgen.engine.procs.child)
                         │            of the asyncio driver
                         ├─► children.py  the one supervisor of sender processes: the --procs
                         │            children and the Locust processes (spawn, logs, reap)
                         └─► locust/  the gevent driver: the Locust master and workers (locust -f
                                      locustfile.py too), client.gevent_wire
      ─► records.jsonl (one Record per request, merged across senders by core/merge.py)

core/ imports no driver; each driver imports core/ and loadgen.client, never another driver's
runtime (no asyncio in a gevent process). Never loadgen.multirun; loadgen.run imports this
package, which reads back run/'s helpers (storage.py, rundir.py, outcome.py; the Locust
engine's CLI side, a runner.Run, also runner.py and engines.py) and loadgen.console's bar
(procs/) (tests/test_layering.py).
"""
