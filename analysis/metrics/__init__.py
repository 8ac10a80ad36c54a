"""analysis.metrics: the figures of a run, as pure functions of its records.

    records (dicts) ─► metrics.py (TTFT, TPOT, ITL, E2E, schedule lag, throughput, goodput;
                                   None, never 0, where data is missing)
                    ─► slo.py (SLO presets from MLPerf's mlperf.conf; the VALID/INVALID verdict)
                    ─► steady.py (the steady-state window: ramp-up and drain cut by a stated rule)
                    ─► series.py (per-second series for plots; power via analysis.energy)
                    ─► summary.py (summary.json: the stable contract of key names)
                       └─ saturation.py (client saturated only when it changed the measurement)
                       └─ accuracy.py (answers right, Wilson ci95), cost.py ($ per million tokens)
    two runs / two repeat series ─► noise.py (per headline figure: change, 95 % interval, verdict)
                                    └─ significance.py (bootstrap over requests/buckets, Welch's t)

May import: numpy, scipy, analysis.energy. Never analysis.report (reports read metrics, not the
reverse).
"""
