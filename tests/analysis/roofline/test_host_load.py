"""A calibration on a busy host is detected from fake load readings, measured again, labelled."""
import itertools

import pytest

from analysis.roofline import calibrate, host_load


def _reading(t, stat, own=0.0, load=1.9, ncpu=2):
    return {"t": t, "stat": stat, "own_cpu_s": own, "loadavg": (load, 1.0, 0.5), "ncpu": ncpu}


def test_between_counts_other_processes_and_steal():
    # 400 jiffies over 2 s on 2 CPUs: 50 idle, 40 steal -> 1.55 CPUs busy; this process used
    # 1 CPU-second in 2 s (0.5 CPU) -> others 1.05 CPUs; steal 10 %
    a = _reading(0.0, (1000, 800, 0), own=0.0)
    b = _reading(2.0, (1400, 850, 40), own=1.0)
    load = host_load.between(a, b)
    assert load["other_cpus"] == pytest.approx(1.05)
    assert load["steal_fraction"] == pytest.approx(0.1)
    assert (load["loadavg_1m"], load["ncpu"], load["seconds"]) == (1.9, 2, 2.0)


def test_unreadable_proc_decides_nothing(tmp_path):
    assert host_load.read_proc_stat(str(tmp_path / "nope")) is None
    load = host_load.between(_reading(0.0, None), _reading(1.0, None))
    assert load["other_cpus"] is None and load["steal_fraction"] is None
    assert host_load.assess(load, {"copy": 0.02}) == {"busy": False, "reasons": [],
                                                      "label": "measured"}


def test_assess_labels_load_and_spread():
    quiet = {"loadavg_1m": 0.3, "ncpu": 8, "other_cpus": 0.4, "steal_fraction": 0.0}
    assert host_load.assess(quiet, {"copy": 0.05, "matmul fp32": 0.1})["busy"] is False
    spread = host_load.assess(quiet | {"loadavg_1m": 1.9}, {"copy": 0.22, "matmul fp32": 0.03})
    assert spread["busy"] and spread["label"] == "measured (busy host: load 1.9, spread 22 %)"
    assert spread["reasons"] == ["copy spread 22% between repeats"]
    others = host_load.assess({"loadavg_1m": 3.0, "ncpu": 2, "other_cpus": 1.5,
                               "steal_fraction": 0.08}, {"copy": 0.01})
    assert others["reasons"] == ["other processes used 1.5 of 2 CPUs", "steal 8%"]
    assert others["label"] == "measured (busy host: load 3.0, spread 1 %, others 1.5 CPUs, steal 8 %)"


def test_spread_is_robust_to_one_outlier():
    assert host_load.spread([1.0]) is None
    assert host_load.spread([1.0, 1.0, 1.0, 1.0]) == 0.0
    assert host_load.spread([1.0, 1.1]) == pytest.approx(0.08 / 1.05)


def _busy_probe():
    """Each reading: every jiffy since the last one busy, none of it this process's: 2 CPUs of
    other work on a 2-CPU host."""
    k = itertools.count()
    return lambda: _reading(float(next(k)), (next(k) * 1000, 0, 0))


def test_calibrate_on_a_busy_host_measures_again_then_labels():
    calls = []
    busy = _busy_probe()

    def probe():
        calls.append(1)
        return busy()
    spec = calibrate.calibrate("cpu", copy_bytes=4 * 2**20, matmul_n=64, repeats=3,
                               dtypes=("fp32",), probe=probe, retry_pause_s=0)
    assert len(calls) == 4                                  # two tries, before and after each
    load = spec.meta["host_load"]
    assert load["busy"] and len(load["attempts"]) == 2
    assert spec.meta["evidence"].startswith("measured (busy host: load 1.9")
    assert "other processes used 2.0 of 2 CPUs" in load["reasons"]


def test_a_quiet_second_try_is_kept(monkeypatch):
    monkeypatch.setattr(host_load, "SPREAD", 1e9)          # only the fake load decides here
    busy, n = _busy_probe(), itertools.count()

    def probe():   # first try busy (readings 0, 1), second quiet (all jiffies idle)
        i = next(n)
        return busy() if i < 2 else _reading(float(i), (i * 1000, i * 1000, 0), load=0.1)
    spec = calibrate.calibrate("cpu", copy_bytes=4 * 2**20, matmul_n=64, repeats=3,
                               dtypes=("fp32",), probe=probe, retry_pause_s=0)
    assert spec.meta["evidence"] == "measured"
    first, second = spec.meta["host_load"]["attempts"]
    assert first["busy"] and not second["busy"]
