"""multirun: several runs of one scenario — a sweep, a search, a --repeat series, a forecast.

    Scenario + sweep block ─► sweep_plan.py (what may run, each point's scenario, decided first)
      ─► sweep.py: one loadgen.run.runner run per load point under one sweep directory,
             resumable (run/multilock.py); max rate under the SLO by bisection, max concurrency
             by integer bisection (sweep_search.py) ─► sweep.json, frontier.json + .png;
             cache_hygiene.py: the prompts a later point re-sends; /reset_prefix_cache
    repeat.py: --repeat N (runs or sweeps) ─► repeat.json with 95 % confidence intervals
    predict.py: a scenario's forecast per load point (analysis.predict); predict_probe.py: the
             short closed-loop calibration runs of ``loadgen predict --calibrate``

Each run is loadgen.run's; this package chooses the runs and collects their summaries. May
import loadgen.run, loadgen.console, loadgen.scenario, loadgen.targets, loadgen.live, analysis,
servers; loadgen.run and loadgen.engine never import it (tests/test_layering.py).
"""
