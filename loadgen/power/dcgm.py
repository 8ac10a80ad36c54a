"""A remote GPU server's energy, scraped from a DCGM exporter's Prometheus endpoint.

    GET power.dcgm_url ─► text format ─► prometheus_client.parser ─► per GPU (label "gpu"):
        DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION  (mJ since boot, a counter; a decrease is a reset)
        DCGM_FI_DEV_POWER_USAGE               (W, averaged by the driver)

The exporter refreshes its values once per collection interval (30 s by default), whatever the
scrape rate, so a reading is stamped when a *changed* value is first seen: that is when the
exporter collected it, to within one scrape period. The interval is estimated from those change
times; one coarser than ``COARSE_S`` draws a warning, and ``linger_s`` keeps the sampler running
one interval past the window end so a fresh value brackets it. GPUs are selected by
``power.gpu_indices`` (label ``gpu``) and ``power.dcgm_labels`` (every label must match).
"""
from __future__ import annotations

import statistics
import urllib.request

from loadgen.power.base import PowerSource, Reading, SourceUnavailable

ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
POWER = "DCGM_FI_DEV_POWER_USAGE"
COARSE_S = 2.0
MAX_LINGER_S = 65.0


def parse_exporter(text: str) -> dict[str, dict]:
    """{device: {"labels", ENERGY: mJ, POWER: W}} from exporter text; device is gpu<N>
    (prefixed with the Hostname label when present)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name = s.name.removesuffix("_total")   # the parser names counter samples *_total
            if name not in (ENERGY, POWER):
                continue
            gpu = s.labels.get("gpu", "?")
            host = s.labels.get("Hostname")
            dev = f"{host}:gpu{gpu}" if host else f"gpu{gpu}"
            d = out.setdefault(dev, {"labels": dict(s.labels)})
            d[name] = float(s.value)
    return out


class DcgmSource(PowerSource):
    name = "dcgm"
    scope = "gpu"
    method = "counter"

    coarse_s = COARSE_S

    def __init__(self, cfg):
        super().__init__(cfg)
        self._last: dict[tuple[str, str], float] = {}
        self._changes: list[int] = []
        self._timeout = max(0.5, min(5.0, 2 * self.period_s))

    def open(self) -> None:
        if not self.cfg.dcgm_url:
            raise SourceUnavailable("power.dcgm_url is not set (the exporter's /metrics URL)")
        snap = self._scrape()
        if not snap:
            raise SourceUnavailable(f"{self.cfg.dcgm_url}: no {ENERGY} or {POWER} for the selected GPUs")
        for dev, d in sorted(snap.items()):
            has = ENERGY in d
            self.devices.append({"device": dev, "labels": d["labels"],
                                 "method": "counter" if has else "integrated_power"})
            if not has:
                self.warn(f"{dev}: exporter has no {ENERGY}; integrating {POWER} (an average)")
        if not any(ENERGY in d for d in snap.values()):
            self.method = "integrated_power"

    def _scrape(self) -> dict[str, dict]:
        try:
            with urllib.request.urlopen(self.cfg.dcgm_url, timeout=self._timeout) as r:
                text = r.read().decode("utf-8", "replace")
        except Exception as e:
            raise SourceUnavailable(f"{self.cfg.dcgm_url}: scrape failed: {e}") from None
        want = self.cfg.gpu_indices
        sel = {}
        for dev, d in parse_exporter(text).items():
            lab = d["labels"]
            if want is not None and lab.get("gpu") not in {str(i) for i in want}:
                continue
            if any(lab.get(k) != v for k, v in self.cfg.dcgm_labels.items()):
                continue
            sel[dev] = d
        return sel

    def read(self) -> list[Reading]:
        snap = self._scrape()
        now = self.clock()
        out, changed = [], False
        for dev, d in snap.items():
            for metric, kind, scale in ((ENERGY, "energy_j", 1e-3), (POWER, "power_w", 1.0)):
                if metric not in d:
                    continue
                v = d[metric]
                prev = self._last.get((dev, metric))
                if prev is not None and v == prev:
                    continue                      # not refreshed since the last scrape
                if metric == ENERGY and prev is not None and v < prev:
                    self.warn(f"{dev}: {ENERGY} decreased ({prev:.0f} -> {v:.0f} mJ): counter reset")
                if prev is not None:
                    changed = True
                self._last[(dev, metric)] = v
                out.append(Reading(dev, "gpu", kind, v * scale))
        if changed:
            self._changes.append(now)
            iv = self.interval_s()
            if iv is not None and iv > self.coarse_s:
                self.warn(f"exporter refreshes about every {iv:.1f} s; ask for ~1 s "
                          "(dcgm-exporter -c 1000) for windows to be bracketed closely")
        return out

    def interval_s(self):
        c = self._changes[-50:]
        if len(c) < 2:
            return None
        return statistics.median(b - a for a, b in zip(c, c[1:])) / 1e9

    def linger_s(self) -> float:
        iv = self.interval_s()
        return min(MAX_LINGER_S, (iv if iv is not None else 0.0) + 2 * self.period_s)

    def describe(self) -> dict:
        d = super().describe()
        d["exporter_interval_s"] = self.interval_s()
        d["url"] = self.cfg.dcgm_url
        return d
