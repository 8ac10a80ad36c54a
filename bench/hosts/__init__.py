"""Simulated hosts on one Linux box (issue 32): Linux namespaces make what a container on another
machine looks like to a loadgen worker, so the Locust engine's cross-host paths (clock offset,
forwarded records, a lost worker) run for real without a second machine.

    netns.py     Hosts: the master's network namespace (master + target server) and K worker
                 hosts, each its own network + time (CLOCK_MONOTONIC offset) + UTS namespace,
                 joined by veth pairs on a bridge; netem delay where the kernel has it; every
                 namespace, link and qdisc removed at exit, also on failure
    cluster.py   Cluster: on Hosts, the calibration server, ``loadgen run --engine locust
                 --master`` and K ``loadgen run --worker``: one run, its run directory
Used by tests (tests/bench/hosts/) and bench/many_hosts.py. Needs root (ip netns, unshare
--time); ``unavailable()`` says why not where it cannot run. May import: servers (the calib
server, by command line), loadgen (by command line only), the standard library.
"""
