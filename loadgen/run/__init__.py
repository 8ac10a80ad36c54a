"""run: one run (or a sweep of runs) from a resolved scenario to a run directory.

    Scenario ─► runner.py ─► harness.py (around every engine's load phase: run dir, server, CPUs,
                             meta.json, device.json, summary.json; the Locust engine's too)
                          ─► targets/ (start a managed server, describe the SUT, scrape /metrics)
                          ─► scenario/workload.py + scenario/schedule.py ─► specs, offsets
                          ─► dispatch.py (offline | server open loop | closed loop) ─► client/
                                 └► Ledger: exactly one Record per request ─► records.jsonl
                          ─► progress.py (live bar)   ─► power/ (samplers ─► power.jsonl)
                          ─► rundir.py ─► analysis/ (summary.json, report.html / report.md)
                          ─► sessions.py (multi-turn: turn k+1 after turn k's answer + think time)
                          ─► meta.py (meta.json), calibration.py (host rates for the roofline, once)
                          ─► running_after.py (load.cancel: the server's running gauge back to 0?)
    sweep.py: one run per load point, resumable; max rate under the SLO by bisection, max
              concurrency by integer bisection (sweep_search.py); frontier.json + .png;
              cache_hygiene.py (prompts a point re-sends; /reset_prefix_cache)
    repeat.py: --repeat N (runs or sweeps) ─► repeat.json with 95 % confidence intervals

May import: everything in loadgen, analysis and servers (it is the orchestrator).
"""
