"""Power sampling around a run's measured window (loadgen.power), shared by both engines.

    PowerHook(cfg, run_dir).start() ─► mark("measure_start") ... mark("measure_end") ─► stop()
        ─► power.jsonl, power_sources.json; result ─► meta.json "power"
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional


class PowerHook:
    """loadgen.power around the measured window; does nothing for sources ["none"]."""

    def __init__(self, cfg, run_dir: Path):
        self.cfg, self.run_dir = cfg, run_dir
        self.session = None
        self.result: Optional[dict] = None

    def start(self) -> "PowerHook":
        if all(s == "none" for s in self.cfg.sources):
            return self
        from loadgen import power     # each source imports its own optional package
        self.session = power.start(self.cfg, self.run_dir)
        self.session.idle_baseline()
        return self

    def mark(self, name: str) -> None:
        if self.session is not None:
            self.session.mark(name)

    def stop(self) -> Optional[dict]:
        if self.session is not None and self.result is None:
            self.result = self.session.stop()
        return self.result
