"""loadgen.power: sources on sysfs-like files, a fake DCGM exporter on 127.0.0.1, none, NVML absent.

Samplers are driven, not waited for: a test steps its files (or a ``ManualClock`` shared by the
session and the fake exporter) and calls ``session.read_now()``, which returns once every sampler
took a read that began after the step. No sleeps, no timing tolerances."""
from __future__ import annotations

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from analysis.energy.window import energy_summary, load_power
from loadgen import power
from loadgen.power.dcgm import DcgmSource, parse_exporter
from loadgen.scenario.model import Power


class ManualClock:
    """A nanosecond clock that moves only when the test says (the session's and the exporter's)."""

    def __init__(self, start_ns: int = 10**12):
        self.ns = start_ns

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += round(seconds * 1e9)


# ---- sysfs-like RAPL tree -------------------------------------------------------------
def put(path: Path, value) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)                     # atomic, as a sysfs read never sees half a value


def make_rapl(root: Path, pkg_max_uj=1_000_000) -> dict[str, Path]:
    pkg = root / "intel-rapl:0"
    zones = {"package": pkg, "dram": pkg / "intel-rapl:0:0", "core": pkg / "intel-rapl:0:1"}
    for name, z in zones.items():
        z.mkdir(parents=True)
        put(z / "name", "package-0" if name == "package" else name)
        put(z / "max_energy_range_uj", pkg_max_uj)
        put(z / "energy_uj", 0)
    (root / "intel-rapl-mmio:0").mkdir()       # not a RAPL zone name this source reads
    return {k: v / "energy_uj" for k, v in zones.items()}


def test_rapl_window_energy_across_a_wrap(tmp_path):
    files = make_rapl(tmp_path / "powercap")
    put(files["package"], 900_000)
    put(files["dram"], 0)
    run = tmp_path / "run"
    s = power.start(Power(sources=["rapl"], rapl_root=str(tmp_path / "powercap"), sample_hz=50), run)
    assert s.read_now()
    s.mark("measure_start")
    assert s.read_now()                       # the start edge is read
    put(files["package"], 100_000)            # wrapped past 1 J: +0.2 J
    put(files["dram"], 100_000)
    put(files["core"], 50_000)
    assert s.read_now()                       # a read sees the wrapped value
    put(files["package"], 400_000)            # +0.3 J
    put(files["dram"], 250_000)
    assert s.read_now()
    s.mark("measure_end")
    assert s.read_now()
    out = s.stop()
    d = out["sources"][0]
    assert d["status"] == "ok" and d["method"] == "counter"
    assert {x["device"] for x in d["devices"]} == {"package-0", "intel-rapl:0:0/dram",
                                                   "intel-rapl:0:1/core"}
    assert d["edges"]["measure_start"]["counters"]["package-0"] == pytest.approx(0.9)
    assert d["edges"]["measure_end"]["counters"]["package-0"] == pytest.approx(0.4)
    rows, sources = load_power(run)
    e = energy_summary(rows, [], None, sources)
    assert e["status"] == "measured"
    assert e["by_scope"]["cpu_package"]["energy_j"] == pytest.approx(0.5)
    assert e["by_scope"]["dram"]["energy_j"] == pytest.approx(0.25)
    assert e["by_scope"]["cpu_core"]["energy_j"] == pytest.approx(0.05)
    assert e["energy_j"] == pytest.approx(0.75)     # package + dram; core is inside the package


def test_rapl_absent_is_unavailable_and_summary_unmeasured(tmp_path):
    s = power.start(Power(sources=["rapl"], rapl_root=str(tmp_path / "nope")), tmp_path / "run")
    s.mark("measure_start")
    s.mark("measure_end")
    out = s.stop()
    d = out["sources"][0]
    assert d["status"] == "unavailable" and "nope" in d["reason"]
    rows, sources = load_power(tmp_path / "run")
    e = energy_summary(rows, [], None, sources)
    assert e["status"] == "unmeasured" and "RAPL" in e["reason"] and e["energy_j"] is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file anyway")
def test_rapl_permission_denied_names_the_cause(tmp_path):
    files = make_rapl(tmp_path / "powercap")
    files["package"].chmod(0)
    s = power.start(Power(sources=["rapl"], rapl_root=str(tmp_path / "powercap")), tmp_path / "r")
    d = s.stop()["sources"][0]
    assert d["status"] == "unavailable" and "CVE-2020-8694" in d["reason"]


def test_failing_source_becomes_failed_not_a_crash(tmp_path):
    files = make_rapl(tmp_path / "powercap")
    s = power.start(Power(sources=["rapl"], rapl_root=str(tmp_path / "powercap"), sample_hz=100),
                    tmp_path / "run")
    assert s.read_now()                       # read fine at first
    files["dram"].unlink()                    # the zone vanishes mid-run
    assert s.read_now()                       # every read from now on fails: returns once it gave up
    d = s.stop()["sources"][0]
    assert d["status"] == "failed" and "reads in a row failed" in d["reason"]
    assert any("read failed" in w for w in d["warnings"])


# ---- none, NVML absent, the clock ----------------------------------------------------------
def test_none_writes_marks_and_reports_unmeasured(tmp_path):
    s = power.start(Power(), tmp_path / "run")
    s.mark("measure_start")
    s.mark("measure_end")
    out = s.stop()
    assert out["sources"] == [] and set(out["marks"]) == {"measure_start", "measure_end"}
    rows, sources = load_power(tmp_path / "run")
    e = energy_summary(rows, [], None, sources)
    assert e["status"] == "unmeasured" and "power.sources" in e["reason"]


def _gpu_present() -> bool:
    try:
        import pynvml
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


@pytest.mark.skipif(_gpu_present(), reason="an NVIDIA GPU is present: see the gpu test")
def test_nvml_without_gpu_is_unavailable_not_a_crash(tmp_path):
    s = power.start(Power(sources=["nvml"], gpu_indices=[0]), tmp_path / "run")
    s.mark("measure_start")
    d = s.stop()["sources"][0]
    assert d["name"] == "nvml" and d["status"] == "unavailable" and d["reason"]


@pytest.mark.gpu
def test_nvml_real_counter_and_instant_power(tmp_path):
    s = power.start(Power(sources=["nvml"], gpu_indices=[0], sample_hz=10), tmp_path / "run")
    s.mark("measure_start")
    time.sleep(2.0)
    s.mark("measure_end")
    out = s.stop()
    d = out["sources"][0]
    assert d["status"] == "ok", d
    rows, sources = load_power(tmp_path / "run")
    e = energy_summary(rows, [], None, sources)
    assert e["status"] == "measured" and e["avg_power_w"] > 10


def test_rows_share_the_monotonic_clock(tmp_path):
    files = make_rapl(tmp_path / "powercap")
    before = time.perf_counter_ns()
    s = power.start(Power(sources=["rapl", "estimate"], estimate_watts=42.0,
                          rapl_root=str(tmp_path / "powercap"), sample_hz=40, idle_baseline_s=0.1),
                    tmp_path / "run")
    idle = s.idle_baseline()
    s.mark("measure_start")
    put(files["package"], 5000)
    for _ in range(4):                        # at least 4 reads of each source, however slow the box
        assert s.read_now()
    s.mark("measure_end")
    out = s.stop()
    after = time.perf_counter_ns()
    rows, _ = load_power(tmp_path / "run")
    assert all(before <= r["t_ns"] <= after for r in rows)
    for name in ("rapl", "estimate"):
        ts = [r["t_ns"] for r in rows if r["source"] == name]
        assert ts == sorted(ts) and len(ts) >= 4
    m = out["marks"]
    assert m["idle_start"] < m["idle_end"] <= m["measure_start"] < m["measure_end"]
    assert idle["idle_s"] >= 0.1
    kinds = {r["kind"] for r in rows}
    assert kinds == {"energy_j", "power_w", "mark"}


# ---- a fake DCGM exporter on 127.0.0.1 --------------------------------------------------
class FakeExporter:
    """Serves DCGM text; GPU 0 draws `watts` from a counter the test can reset."""

    def __init__(self, watts=200.0, refresh_s=0.0, clock=time.perf_counter_ns):
        self.watts, self.refresh_ns, self.clock = watts, round(refresh_s * 1e9), clock
        self.base_mj = 5_000_000.0
        self.t0 = clock()
        self.last = (None, None)
        self.lock = threading.Lock()
        fake = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                body = fake.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def energy_mj(self):
        now = self.clock()
        with self.lock:
            t, v = self.last
            if t is None or now - t >= self.refresh_ns:  # the exporter's collection interval
                v = self.base_mj + self.watts * (now - self.t0) / 1e6
                self.last = (now, v)
            return v

    def reset(self):
        with self.lock:
            now = self.clock()
            self.base_mj, self.t0, self.last = 0.0, now, (None, None)

    def text(self):
        e0 = self.energy_mj()
        lab = 'gpu="{g}",UUID="GPU-{g}",device="nvidia{g}",modelName="H200",Hostname="{h}"'
        lines = ["# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy since boot (mJ).",
                 "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter",
                 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{%s} %.1f" % (lab.format(g=0, h="h1"), e0),
                 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{%s} %.1f" % (lab.format(g=1, h="h1"), 9e9),
                 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{%s} %.1f" % (lab.format(g=0, h="h2"), 8e9),
                 "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).",
                 "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
                 "DCGM_FI_DEV_POWER_USAGE{%s} %.3f" % (lab.format(g=0, h="h1"), self.watts),
                 "DCGM_FI_DEV_POWER_USAGE{%s} 700.0" % lab.format(g=1, h="h1")]
        return "\n".join(lines) + "\n"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def exporter(clock):
    ex = FakeExporter(clock=clock)
    yield ex
    ex.close()


def test_parse_exporter_text(exporter):
    got = parse_exporter(exporter.text())
    assert set(got) == {"h1:gpu0", "h1:gpu1", "h2:gpu0"}
    assert got["h1:gpu1"]["DCGM_FI_DEV_POWER_USAGE"] == 700.0


def test_dcgm_selects_gpus_and_survives_a_reset(tmp_path, exporter, clock):
    cfg = Power(sources=["dcgm"], dcgm_url=exporter.url, gpu_indices=[0],
                dcgm_labels={"Hostname": "h1"}, sample_hz=20)
    s = power.start(cfg, tmp_path / "run", clock=clock)
    clock.advance(0.15)
    assert s.read_now()
    t0 = s.mark("measure_start")
    assert s.read_now()                       # the start edge
    clock.advance(0.3)
    assert s.read_now()                       # the last read before the reset, at the reset's time
    exporter.reset()                          # the exporter restarts: counter back to 0
    assert s.read_now()
    clock.advance(0.3)
    assert s.read_now()
    t1 = s.mark("measure_end")
    assert s.read_now()                       # the end edge
    clock.advance(1.0)                        # past the linger: stop() need not wait
    out = s.stop()
    d = out["sources"][0]
    assert d["status"] == "ok" and [x["device"] for x in d["devices"]] == ["h1:gpu0"]
    assert any("counter reset" in w for w in d["warnings"])
    assert d["exporter_interval_s"] is not None
    rows, sources = load_power(tmp_path / "run")
    assert {r["device"] for r in rows if r["kind"] != "mark"} == {"h1:gpu0"}
    e = energy_summary(rows, [], None, sources)
    want = 200.0 * (t1 - t0) / 1e9
    # a reset loses at most the energy between the last scrape before it and the reset itself
    assert want - 200.0 * 0.3 <= e["energy_j"] <= want + 200.0 * 0.15
    assert t1 - t0 == 600_000_000                                 # the window is the test's steps
    assert "reset" in " ".join(e["series"][0]["notes"])


def test_dcgm_coarse_exporter_interval_is_estimated_and_warned(tmp_path, clock):
    ex = FakeExporter(watts=100.0, refresh_s=0.3, clock=clock)
    try:
        src = DcgmSource(Power(sources=["dcgm"], dcgm_url=ex.url, gpu_indices=[0], sample_hz=20))
        src.clock = clock                     # the session would set it; here the test drives it
        src.coarse_s = 0.1                    # this test's threshold; the default is 2 s
        src.open()
        for _ in range(32):                   # 1.6 s of reads every 50 ms, on the test's clock
            src.read()
            clock.advance(0.05)
        iv = src.interval_s()
        assert 0.2 <= iv <= 0.7
        assert iv == pytest.approx(0.3)       # a change is seen at the first read after it
        assert src.linger_s() >= iv
        assert any("refreshes about every" in w for w in src.warnings)
    finally:
        ex.close()


def test_dcgm_unreachable_is_unavailable(tmp_path):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = srv.server_address[1]
    srv.server_close()                        # nothing listens on this port now
    s = power.start(Power(sources=["dcgm"], dcgm_url=f"http://127.0.0.1:{port}/metrics"),
                    tmp_path / "run")
    d = s.stop()["sources"][0]
    assert d["status"] == "unavailable" and "scrape failed" in d["reason"]


def test_estimate_is_labelled_and_kept_apart(tmp_path):
    s = power.start(Power(sources=["estimate"], estimate_watts=250.0, sample_hz=40), tmp_path / "r")
    s.mark("measure_start")
    assert s.read_now()
    s.mark("measure_end")
    out = s.stop()
    assert out["sources"][0]["evidence"] == "estimated"
    rows, sources = load_power(tmp_path / "r")
    e = energy_summary(rows, [], None, sources)
    assert e["status"] == "estimated" and e["avg_power_w"] == pytest.approx(250.0)
    assert "by hand" in e["estimated"]["methods"][0]
    none = power.start(Power(sources=["estimate"]), tmp_path / "r2").stop()["sources"][0]
    assert none["status"] == "unavailable" and "estimate_watts" in none["reason"]


# ---- the whole chain: runner ─► power session ─► summary.json["energy"] ---------------------
@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_run_with_a_live_rapl_tree_reports_energy(calib_server, tmp_path):
    from loadgen.run.runner import run_scenario
    from loadgen.scenario.loader import scenario_from_dict

    files = make_rapl(tmp_path / "powercap", pkg_max_uj=10**12)
    stop = threading.Event()
    t0_ns = time.perf_counter_ns()            # the records' clock: a value tells when it was written

    def package_at_50_w():                    # a counter rising at 50 W, as the CPU would
        while not stop.is_set():
            put(files["package"], (time.perf_counter_ns() - t0_ns) // 20)   # µJ = 50 W × ns / 1e9
            time.sleep(0.01)

    th = threading.Thread(target=package_at_50_w, daemon=True)
    th.start()
    try:
        sc = scenario_from_dict({
            "name": "energy", "target": {"url": calib_server.url},
            "api": {"extra_body": {"calib": {"ttft_ms": 20, "itl_ms": 10}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 8}},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 24},  # >1 s window
            "power": {"sources": ["rapl", "estimate"], "rapl_root": str(tmp_path / "powercap"),
                      "sample_hz": 50, "estimate_watts": 300},
            "output": {"dir": str(tmp_path), "run_name": "run"}})
        res = run_scenario(sc)
    finally:
        stop.set()
        th.join(2)
    import json
    summary = json.loads((res.run_dir / "summary.json").read_text())
    e = summary["energy"]
    assert e["status"] == "measured", e.get("reason")
    # The chain is exact up to how stale each read value was, and a value says when it was written
    # (t0 + value / 50 W), so the tolerance is what this run's reads show, not a guess about the
    # box: at each window edge the interpolated counter is off by at most 50 W × the staleness of
    # the two reads around it (a writer or sampler held up by a busy box widens it, never fails it).
    rows, _ = load_power(res.run_dir)
    pkg = sorted((r["t_ns"], r["value"]) for r in rows
                 if r["source"] == "rapl" and r["device"] == "package-0" and r["kind"] == "energy_j")
    stale = [(t, t - (t0_ns + v * 1e9 / 50.0)) for t, v in pkg]    # read time − write time, ns
    assert len(stale) >= 2 and all(t0_ns <= t <= time.perf_counter_ns() for t, _ in pkg)   # the records' clock
    w = e["window"]
    dur_s = (w["end_ns"] - w["start_ns"]) / 1e9

    def around(edge):                         # the staleness of the reads either side of an edge
        before = [s for t, s in stale if t <= edge][-1:]
        after = [s for t, s in stale if t >= edge][:1]
        return max(abs(s) for s in before + after) / 1e9
    slack_j = 50.0 * (around(w["start_ns"]) + around(w["end_ns"])) + 1e-3
    assert abs(e["by_scope"]["cpu_package"]["energy_j"] - 50.0 * dur_s) <= slack_j
    assert e["by_scope"]["cpu_package"]["avg_power_w"] == pytest.approx(
        e["by_scope"]["cpu_package"]["energy_j"] / dur_s)
    assert e["energy_j"] == pytest.approx(e["by_scope"]["cpu_package"]["energy_j"])  # no estimate
    assert e["estimated"]["avg_power_w"] == pytest.approx(300.0)
    assert e["j_per_output_token"] == pytest.approx(e["energy_j"] / e["output_tokens"])
    pr = e["per_request"]
    assert pr["attributed_j"] + pr["unattributed_j"] == pytest.approx(e["energy_j"])
    assert (res.run_dir / "power.jsonl").is_file()
