"""console: what a run shows on the terminal — nothing else reads it.

    Dispatcher / --procs counters ─► progress.RunProgress (the live bar on a TTY; warnings)
    summary.json ─► progress.print_summary (the final table, failure causes, roofline line)

May import rich and analysis (report lines, contract readers); never loadgen.run, engine,
multirun, client or targets (tests/test_layering.py): its callers hand it what to show.
"""
