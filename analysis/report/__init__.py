"""analysis.report: run and sweep directories ─► report.md / report.html (and comparisons).

    run dir ─► report.py ─► blocks: summary table, verdict, plots.py (CDFs, time series, timeline),
                            conditions.py (the 11-item conditions table, the roofline relation;
                            what sut.json says about the server read by sut.py),
                            server_metrics.py (server-side section), manifest.py (reproducibility),
                            cost_accuracy.py (accuracy and cost rows; the console's lines too)
            ─► render.py (blocks ─► markdown, self-contained HTML)
    sweep dir ─► sweep.py ─► plots_sweep.py        run dirs ─► compare.py (side by side, or refused)

May import: everything in analysis, matplotlib. Never loadgen.
"""
