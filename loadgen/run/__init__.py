"""run: one run (or a sweep of runs) from a resolved scenario to a run directory.

    Scenario ─► runner.py ─► targets/ (start a managed server, describe the SUT, scrape /metrics)
                          ─► scenario/workload.py + scenario/schedule.py ─► specs, offsets
                          ─► dispatch.py (offline | server open loop | closed loop) ─► client/
                                 └► Ledger: exactly one Record per request ─► records.jsonl
                          ─► progress.py (live bar)   ─► power/ (samplers ─► power.jsonl)
                          ─► rundir.py ─► analysis/ (summary.json, report.html / report.md)
    sweep.py: one run per load point, resumable; max rate under the SLO by bisection

May import: everything in loadgen, analysis and servers (it is the orchestrator).
"""
