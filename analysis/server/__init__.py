"""analysis.server: server-side figures from the server's own /metrics samples.

    run_dir/server_metrics.jsonl + meta.json window ─► metrics.py
        histograms ─► mean server TTFT, queue, prefill, decode, E2E (with bucket resolution)
        gauges     ─► running / waiting / KV-cache use;  counters ─► prefix-cache hit rate
        + records  ─► client TTFT decomposed into network + queue + prefill + other

May import: numpy, analysis.metrics. Never analysis.report.
"""
