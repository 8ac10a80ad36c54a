"""The runner's meta.json host_load counts its managed server (target.server: the process tree
it started) apart from other processes (issue 38): the reader it hands analysis.roofline.host_load."""
from analysis.roofline import host_load


def test_the_runner_reads_its_managed_servers_tree_and_nothing_without_one():
    import os
    from types import SimpleNamespace as NS

    from loadgen.run.runner import Run
    read = Run._server_cpu(NS(server=NS(proc=NS(pid=os.getpid()))))
    assert read is not None and read() > 0
    assert Run._server_cpu(NS(server=None)) is None
    start = host_load.snapshot(server_cpu=read)
    assert start["server_cpu_s"] is not None
    start["t"] -= 1.0                 # one second ago: no wait, whatever /proc/stat's tick says
    assert "server_cpus" in host_load.over_run(start, server_cpu=read)


def test_the_servers_share_is_kept_even_when_proc_stat_has_not_ticked():
    a = {"t": 0.0, "stat": (100, 50, 0), "own_cpu_s": 0.0, "loadavg": None, "ncpu": 2,
         "server_cpu_s": 1.0}
    b = {**a, "t": 2.0, "server_cpu_s": 2.0}            # same jiffies: no host share
    out = host_load.between(a, b)
    assert out["server_cpus"] == 0.5 and out["other_cpus"] is None
    b = {**b, "stat": (300, 100, 0), "own_cpu_s": 0.5}   # 200 jiffies, 150 busy of 2 CPUs
    out = host_load.between(a, b)
    assert out["server_cpus"] == 0.5
    assert out["other_cpus"] == round(150 / 200 * 2 - 0.25 - 0.5, 2)
