"""``client.processes: N`` (``loadgen run --procs N``): N sender processes, one run.

    runner.Run (target, probe, sut.json, power, /metrics, the live bar, meta.json)
      ├─► parent.py   Senders: spawn n x ``python -m loadgen.engine.procs.child`` (same process
      │               group), Job on stdin (job.py), all warmed up ─► one t0 ─► "go t0";
      │               the parts merged (engine.core.merge), meta.json's ``client_processes``
      └─► child.py    sender k: its slice of the plan (engine.core.plan.Plan(sc, k, n), a Locust
                      worker's too) through the Dispatcher ─► procs/records.k.jsonl (or .arrow),
                      engine.core.counters (procs/progress.k.bin) ─► the bar

One clock: perf_counter_ns is CLOCK_MONOTONIC, shared by every process on the host, so the
records of all processes sit on one time line with the parent's t0. processes 1 (the default)
never comes here: runner.Run runs the one-process client. The rules every sender follows
(partition, plan slice, ledger, merge, stages, counters) are loadgen.engine.core's; this
package spawns, feeds and waits (by loadgen.engine.children, the Locust processes' supervisor too).
Imports: loadgen.engine.aio.dispatch, loadgen.engine.core, loadgen.engine.children, loadgen.client,
loadgen.scenario, loadgen.record; never gevent, locust or loadgen.engine.locust. Nothing is
forked: children start fresh interpreters.
"""
