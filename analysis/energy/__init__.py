"""analysis.energy: joules from power.jsonl, on the records' clock.

    power.jsonl rows ─► series.py (per source/device: energy counter deltas, or trapezoid over watts;
                                   wraparound and resets handled)
                     ─► energy.py (window energy, average power, J/token, J/request; evidence label,
                                   or 'unmeasured' with the reason)
                     ─► split.py  (per-request J with prefill / decode parts, summing to the window)

May import: numpy. Nothing else of ours.
"""
