"""analysis.server: server-side figures from the server's own /metrics samples.

    run_dir/server_metrics.jsonl ─► series.py (rows ─► Series per sample name; window edges: the
                                               scrapes around meta.json's measured window)
        histograms ─► histogram.py (mean; quantile with its bucket and resolution)
    metrics.py: histograms ─► mean server TTFT, queue, prefill, decode, E2E (+ quantiles)
                gauges     ─► running / waiting / KV-cache use;  counters ─► prefix-cache hit rate
                + records  ─► client TTFT decomposed into network + queue + prefill + other
    sanity.py: the gate every value a server says passes (gauges, counters, ratios, Retry-After,
               usage counts, spans) ─► a value, or None with the reason

May import: numpy, analysis.metrics. Never analysis.report.
"""
