"""targets: the system under test as the client sees it — started, described, scraped, stopped.

    ServerSpec ─► managed.py (argv: servers.jax | servers.vllm.launch | command; start, /health,
                              log to server.log, stop the process group)
    base URL   ─► sut.py (GET /v1/models, /version, /info, headers, client host ─► sut.json)
               ─► scrape.py (GET /metrics every interval, parsed off the event loop ─►
                             server_metrics.jsonl on the records' clock)

May import: loadgen.scenario, loadgen.record, servers (launch helpers), aiohttp, prometheus-client.
"""
