"""analysis: pure functions of a run directory (records.jsonl, power.jsonl, sut.json).

    records (dicts) ─► metrics.py (TTFT, TPOT, ITL, E2E, lag, throughput, goodput; None if missing)
                    ─► slo.py (SLO presets, MLPerf-style verdict)
                    ─► steady.py (steady-state window: ramp-up and drain cut by a rule)
                    ─► summary.py (summary.json, the stable contract)   ─► report.py (md / html)
                    ─► series.py (per-second series) ─► plots.py        ─┘  render.py
    run dirs + scenario.yaml ─► manifest.py (reproducibility), compare.py (side by side)
    sweep dir (sweep.json + run dirs) ─► report_sweep.py ─► plots_sweep.py
    HF config.json ─► model_spec.py (shape dict) ─► model_cost.py
    power.jsonl     ─► energy.py (window energy, J/token, per-request split)
    devices.py (spec catalogue with evidence) ─► roofline.py ◄─ model cost arithmetic
    kernel.py (Y = ReLU(XW + b) across frameworks and time boundaries)

Imports nothing of ours: it reads files and dicts only.
"""
