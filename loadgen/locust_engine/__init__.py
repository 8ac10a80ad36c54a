"""The Locust engine: the same scenario, records and run directory, sent by Locust (gevent).

    loadgen CLI process (asyncio world; never imports gevent)          run.py
      Run(sc): run_dir, scenario.yaml, sut.json (GET /v1/models), power ─┐
      subprocesses, own sessions ───────────────────────────────────────┤
        python -m loadgen.locust_engine.worker --role local             │ worker.py
          | --role master (+ N x --role worker, or remote --worker)     │ (gevent-patched)
             Coordinator (coordinator.py): plan ─► ready ─► users ─► warm ─► go(t0) ─► done
             RequestSource (request_source.py) per worker i of n: the gevent driver of
               senders.sender.SliceSender(Plan(sc, i, n)): what is due next and when
               (loadgen.run.senders: the one partition, plan slice, ledger, merge, stage
                driver, session book and clock-offset record of every sender, --procs too;
                sessions.py: a user plays a whole conversation and only waits and sends)
               LLMUser (user.py, a Locust User): body (client.request.Shape, the native
                 Client's) ─► gevent_wire.client.GWire (gevent_wire/client.py: one keep-alive
                 connection per user and URL, target.urls' replica by balance.Picker;
                 the wire transport's record rules) ─► gevent_wire.conn.GConn
                 (gevent_wire/conn.py: sends; the process's ONE reader, reader.py, one epoll for every
                 streaming socket, reads them inline: recvmsg + SO_TIMESTAMPNS, the kernel's
                 receive stamp per read on perf_counter_ns, httptools framing, the stream
                 step; the user's greenlet wakes once, at the answer's end) ─►
                 stream_step.StreamStep (the native transports' one step) ─► Record
                 ─► ledger.py (the line written when the hub is idle, idle.py; GC held from
                 warm-up to done, its young generation collected when the hub idles)
                 ─► locust/records.worker-i.jsonl
                 (body and record rules: loadgen/client/request.py, the native client's own)
                 (+ locust/sent.worker-i.jsonl journal; remote workers also forward both
                  through Locust messages into the master's run directory)
             ─► locust/master.json (t0, end, worker status done|dead, CPU, hub lag)
      results.py: plan ∪ journal ─► owed ids ─► senders/merge.py ─► records.jsonl, one per owed id
        (a dead worker's finished records kept; its unfinished ones "cancelled": "worker i died")
      Outcome(engine "locust", locust {...}) + Prepared ─► run.meta.run_meta ─► meta.json ─► summary.json

    locustfile.py: the same user and protocol for ``locust -f`` (web UI), LOADGEN_SCENARIO=path.

Schedule slices interleave (request k of a phase belongs to worker k mod n), so each worker's
share of a Poisson schedule is itself Poisson and t0 is one instant for all (CLOCK_MONOTONIC on
one host; a worker on another host shifts its stamps onto the master's clock by an offset it
measured by ping-pong over Locust's messages, ± half the tightest round trip: clock.py, recorded
in meta.json ``locust.clock``). Latencies are differences of one worker's own stamps.
Locust's own statistics (rounded) only feed its UI: one request event per request, E2E; no
per-token pseudo-requests. Metrics come from the records, like the native engine's.
May import: loadgen.client (request rules, stream step, balance.Picker, wire.exchange),
loadgen.run.senders (the sender's rules), loadgen.scenario, loadgen.record; the gevent side
never asyncio or aiohttp (tests/loadgen/locust_engine/test_locust.py checks it).
"""
