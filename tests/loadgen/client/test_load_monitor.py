"""ClientLoad: CPU share and loop lag of this process over a window."""
import asyncio
import gc
import time

from loadgen.client.load_monitor import GC_GEN0, ClientLoad, gc_hold, gc_release


async def test_a_blocked_loop_shows_as_loop_lag():
    load = ClientLoad(interval_s=0.02).start()
    await asyncio.sleep(0.05)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.3:      # the loop cannot run its sampler meanwhile
        pass
    await asyncio.sleep(0.05)
    res = load.stop()
    assert res["loop_lag_ms_max"] > 150 and res["cpu_s"] > 0.05
    assert "saturated" not in res      # figures only: analysis.metrics.saturation judges them


async def test_an_idle_loop_uses_little_cpu():
    load = ClientLoad(interval_s=0.02).start()
    await asyncio.sleep(0.3)
    res = load.stop()
    assert res["cpu_util"] < 0.5 and res["samples"] >= 5 and res["evidence"] == "measured"


def test_gc_hold_nests_and_restores_the_thresholds():
    before = gc.get_threshold()
    gc_hold()
    gc_hold()
    assert gc.get_threshold()[0] >= GC_GEN0
    gc_release()
    assert gc.get_threshold()[0] >= GC_GEN0      # one holder left
    gc_release()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
