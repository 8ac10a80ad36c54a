"""run: one run's lifecycle, from a resolved scenario to a run directory.

    Scenario ─► runner.py ─► harness.py (around every engine's load phase: run dir, server, CPUs,
                             meta.json, device.json, summary.json; the Locust engine's too)
                          ─► preflight.py ─► targets/ (managed server, the SUT, scrape /metrics)
                          ─► outcome.py: Prepared (scenario/workload.py + scenario/schedule.py
                             ─► specs, offsets; the run dir: rundir.py claim, storage.py)
                          ─► the load phase: loadgen.engine (core/ rules; aio/ Dispatcher,
                             procs/ --procs N, the Locust engine) ─► records.jsonl
                          ─► loadgen.console (live bar, final table)  ─► power_hook.py ─► power/
                          ─► meta.py (meta.json), calibration.py (device.json, host rates once)
                          ─► server_traces.py, client_spans.py (OTLP in / out), running_after.py
                             (load.cancel: the server's running gauge back to 0?)
                          ─► rundir.py ─► analysis/ (summary.json, report.html / report.md)
    engines.py (what each engine runs, one rule), fdlimit.py (RLIMIT_NOFILE), multilock.py (the
    run dir's and a multi-run dir's lock). Several runs (sweep, search, --repeat): loadgen.multirun.

May import: loadgen.engine, loadgen.console, loadgen.client, loadgen.scenario, loadgen.targets,
loadgen.power, loadgen.live, analysis, servers (it is the orchestrator of one run); never
loadgen.multirun (tests/test_layering.py).
"""
