"""``client.processes: N`` (``loadgen run --procs N``): N sender processes, one run.

    runner.Run (parent: target, probe, sut.json, power, /metrics, the live bar, meta.json)
      │ plan + schedule built ONCE (outcome.prepare), specs as one process builds them
      ├─► senders/partition.py  process k of n: planned items k, k+n, ... (offline, server,
      │                 trace: an even share of the arrival times); closed loop: users, num_requests and
      │                 stage users split n ways, ids first+k, first+k+n, ...
      ├─► parent.py     Senders: spawn n x ``python -m loadgen.run.procs.child`` (same process
      │                 group), Job on stdin (job.py), all warmed up ─► one t0 ─► "go t0"
      │     child.py    per process: own event loop, Client (wire transport, kernel stamps),
      │                 Dispatcher + senders/ledger.py (tag worker="k") ─► procs/records.k.jsonl
      │                 job.Counters (procs/progress.k.bin: state, issued, sent, done) ─► the bar
      ├─► senders/merge.py  parts ─► records.jsonl: one record per owed id (unwritten ones
      │                 "cancelled", naming the process that died or stopped)
      └─► describe.py   client_processes, client_load (the busiest process), transport ─► meta.json

One clock: perf_counter_ns is CLOCK_MONOTONIC, shared by every process on the host, so the
records of all processes sit on one time line with the parent's t0. processes 1 (the default)
never comes here: runner.Run runs the one-process client as before.
The rules every sender follows (partition, plan slice, ledger, merge, stages) are
loadgen.run.senders', the Locust workers' too; this package spawns, feeds and waits.
Imports: loadgen.run.dispatch, loadgen.run.senders, loadgen.client, loadgen.scenario,
loadgen.record; never gevent, locust or loadgen.locust_engine. Nothing is forked: children start fresh interpreters.
"""
