"""analysis: pure functions of a run directory (records.jsonl, power.jsonl, sut.json, meta.json).

    records ─► metrics/ (TTFT, TPOT, ITL, E2E, throughput, goodput; SLO verdict; steady window;
               summary.json) ───────────────────────────────────────────────────────────────┐
    power.jsonl ─► energy/ (window energy, J/token, per-request split) ───────────────────────┤
    server_metrics.jsonl ─► server/ (server-side figures, TTFT decomposition) ─────────────────┤
    config.json / sut.json model ─► roofline/ (cost arithmetic, device specs, bounds, MBU/MFU) ─┤
    kernel/ (Y = ReLU(XW + b) across frameworks and time boundaries; a decode step as GEMVs)    │
    report/ (run and sweep reports, conditions, manifest, compare) ◄───────────────────────────┘

Imports nothing of loadgen or servers: it reads files and dicts only (tests/test_layering.py).
"""
