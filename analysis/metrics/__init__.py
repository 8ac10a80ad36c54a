"""analysis.metrics: the figures of a run, as pure functions of its records.

    records (dicts) ─► metrics.py (TTFT, TPOT, ITL, E2E, schedule lag, throughput, goodput;
                                   None, never 0, where data is missing)
                    ─► slo.py (SLO presets from MLPerf's mlperf.conf; the VALID/INVALID verdict)
                    ─► steady.py (the steady-state window: ramp-up and drain cut by a stated rule)
                    ─► series.py (per-second series for plots; power via analysis.energy)
                    ─► summary.py (summary.json: the stable contract of key names)

May import: numpy, analysis.energy. Never analysis.report (reports read metrics, not the reverse).
"""
