"""Live client metrics: ``loadgen run --metrics-port P`` serves Prometheus text on /metrics.

    loadgen run (the stamping interpreter: nothing added per event)
      flags.py    --metrics-port / --metrics-host checked ─► process.LiveExporter.open
      process.py  socket bound here ─► child ``python -m loadgen.live.exporter`` (fd inherited)
      feed.py     Mirror: a timer thread copies RunProgress's counters (the progress bar's
                  feed) into a 64-byte shared file ──────────────────┐
      runner.Run ─► run_dir/records.jsonl (procs/records.K.jsonl) ───┤
                                                                     ▼
    exporter.py (its own process, nice +10): follow.py tails the records, each id once
      ─► metrics.py LiveMetrics.observe(record) ─► counters, histograms; in flight: the feed
      ─► GET http://127.0.0.1:P/metrics (prometheus_client text format)

Served from before the run until it ends (interrupt included); nothing is written to the run
directory. docs/live-metrics.md; docs/grafana/loadgen.json queries these names.
May import: prometheus_client, analysis.metrics, loadgen.run (runner, engine.core.counters),
loadgen.scenario, loadgen.child_env (the exporter process's environment).
"""
