"""analysis: pure functions of a run directory (records.jsonl, power.jsonl, sut.json).

    records (dicts) ─► metrics.py (TTFT, TPOT, ITL, E2E, lag, throughput, goodput; None if missing)
                    ─► slo.py (SLO presets, MLPerf-style verdict)
                    ─► summary.py (summary.json, the stable contract)   ─► report.py (md / html)
    power.jsonl     ─► energy.py (window energy, J/token, per-request split)
    devices.py (spec catalogue with evidence) ─► roofline.py ◄─ model cost arithmetic
    kernel.py (Y = ReLU(XW + b) across frameworks and time boundaries)

Imports nothing of ours: it reads files and dicts only.
"""
