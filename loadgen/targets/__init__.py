"""targets: the system under test as the client sees it — started, described, scraped, stopped.

    ServerSpec ─► managed.py (start, /health with a live stderr line, log to server.log, stop
                              the process group)
                  ├ server_argv.py (argv: servers.jax | servers.vllm | command; the server's env)
                  └ server_record.py (server.json: how it was started and stopped, or why it
                                      failed)
    base URL   ─► ready.py (before the probe: /health 200 and no 503, up to api.ready_timeout_s)
               ─► probe.py (before the run: /v1/models serves api.model? a one-token request
                            takes loadgen's fields? else ProbeError, or drop them with a warning)
               ─► context_fit.py (the workload's largest prompt + output within the stated context?)
               ─► sut.py (GET /v1/models, /version, /info, headers, client host ─► sut.json)
               ─► scrape.py (drives scrape_worker.py, its own process: GET /metrics every
                             interval, parse (prometheus_text.py), write ─► server_metrics.jsonl
                             on the records' clock; the client's interpreter never parses)

May import: loadgen.scenario, loadgen.record, loadgen.client (the probe request), servers
(launch helpers), aiohttp, prometheus-client.
"""
