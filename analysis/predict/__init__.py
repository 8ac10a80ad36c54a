"""Forecasts of a server's latency and throughput before it is measured (docs/predict.md).

    step_model.py  one engine step's time: roofline floor (analysis.roofline) + fitted overheads
    workload.py    seeded prompt/output length samples from a scenario's distributions
    simulate.py    continuous batching under a load point (closed loop or arrivals), bounded
    fit.py         per-step overheads fitted to calibration probes (least squares, >= 0)
    forecast.py    points ─► {grade, fit, points: [...]}; error of a forecast against a summary
    overlay.py     sweep rows with forecasts ─► frontier.json "forecast" (predicted beside measured)
"""
