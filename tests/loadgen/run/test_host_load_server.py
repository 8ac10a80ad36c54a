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
    assert "server_cpus" in host_load.over_run(start, server_cpu=read)
