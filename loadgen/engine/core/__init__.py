"""engine.core (the senders' rules): what every sender process shares, whatever runs it — a ``--procs`` child (asyncio)
or a Locust worker (gevent). A slice of the plan in, records out, by one set of rules:

    plan.py       the run's requests, sliced for sender k of n (warm-up, measured, sessions)
    sender.py     the sans-I/O sender: its slice in, what to send next and when, the stage
                  gate, the in-flight table and the drain rule (the runtime waits and sends)
    partition.py  THE partition: request k of a phase ─► sender k mod n; the process count;
                  users, num_requests and stage users split n ways
    ledger.py     each request's record exactly once (a failed write stops the run); cancelled
                  records; the sender's tag (Record.worker)
    merge.py      the senders' part files + what each owes ─► one records.jsonl, one record per
                  owed id (unwritten ones "cancelled", naming why)
    merge_arrow.py  the same rules for output.records: arrow: records.arrow parts ─► one
                  records.arrow, a record batch at a time
    stages.py     the concurrency-stage driver: which user each stage needs, when
    sessions.py   THE session driver: which session next, each turn's time, the turn budget,
                  ids, what a stop or a drain cancels (the runtimes wait and send)
    in_flight.py  a request in flight when its sender stops: its record settled "cancelled"
    journal.py    the send journal (Locust workers): its lines, plan ∪ journal ─► owed ids ─►
                  merge; the progress follower of part files
    clock.py      one clock-offset record: each sender's shift onto the run's clock ± its bound
    counters.py   the progress counter file a sender bumps (state, issued, sent, ok, ...)
    describe.py   the senders' figures summed for meta.json: client_load (the busiest
                  sender), each target.urls replica's sends over every sender, transport and
                  connection blocks

Pure: no asyncio, no gevent, no sockets (the runtimes only wait and send). May import
analysis.contract (merge_arrow: the columnar parts), loadgen.record, loadgen.redact, loadgen.scenario, loadgen.run.storage, the pure
loadgen.client.request (in_flight.snapshot's counts) and the pure
loadgen.client.kernel_stamps.best_bracket (the one round-trip rule); never loadgen.client's
transports, loadgen.engine.procs or loadgen.engine.locust.
"""
