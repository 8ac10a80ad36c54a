"""Benchmarks and measurement harnesses (not tests): each module is one bench, run from the repository root as

    python -m bench.NAME [--help]            e.g. python -m bench.timing_truth --quick

What is here:
    timing_truth          loadgen's TTFT/ITL against a loopback packet capture (bench.wire: pcap → TCP →
                          HTTP → SSE → per-request errors), native, --procs and --engine locust
    capacity_vs_mlperf_endpoints, client_capacity, locust_capacity, wire_vs_aiohttp, stream_tally,
    ab_run                the client's speed: events/s and CPU per event, against peers and against an
                          older revision (ab_run: a git worktree imported through PYTHONPATH in the child)
    hostile               what loadgen survives: every case of servers/hostile × transport (also the
                          harness of tests/loadgen/client/test_hostile.py)
    scrape_interference   whether scraping /metrics disturbs the client's timing
    report_speed          how fast and how small reading a big run is (loadgen report, open_run)
    soak                  a long run's memory: RSS over time, growth 20 %→95 % of the load, peak; its
                          report's time and peak, bytes per record (native, --procs, Locust, --synthetic N)
    decode_roofline, decode_profile, ffi_matmul, jax_batch1, engine_vs_llama_cpp
                          the built-in JAX server: decode roofline, per-op profile, FFI matmul kernel,
                          batch-1 over HTTP (--tree DIR: an old checkout's server, same sitting), and
                          against llama.cpp
    many_hosts            the Locust engine across K simulated hosts (bench/hosts/: network + time + UTS
                          namespaces): clock offset vs truth, TTFT vs a capture on each worker's veth
    many_streams          slow streams held at once from one client namespace (toward 100,000);
                          held_streams the same with --procs on one host (record_counts.py: their tally)
    nvml_power_check      the NVML energy path on a GPU host; gpu_check.sh runs the GPU checks in one go
    make_traces           writes scenarios/traces/ (seeded)
    locust_streaming.py   a locustfile (`locust -f bench/locust_streaming.py`), never imported
    compat/               real servers (vLLM, llama.cpp, transformers): install, models, record fixtures,
                          the compatibility matrix (python -m bench.compat.matrix), speculative decoding
                          and LoRA adapters on vLLM CPU through `loadgen run` (python -m bench.compat.served)
    wire/                 the packet-capture reader and comparison behind timing_truth
    results/              what the benches printed, dated (the figures docs/benchmarks.md quotes)

Imports: bench may import loadgen, analysis, servers and itself; loadgen, analysis and servers never
import bench (tests/bench/test_bench_package.py checks both ways); tests may (tests/bench, the hostile
harness of tests/loadgen/client/test_hostile.py, bench.compat in the replay tests). bench never imports
tests/ and never edits sys.path: it is a package found from the repository root (the current directory
under `python -m`). A bench that measures another source tree (ab_run --base, timing_truth --loadgen-root,
jax_batch1 --tree) runs that tree in a subprocess with cwd and PYTHONPATH set to it. Timing benches want a
quiet host (pin, flock /tmp/bench.lock); the suite never runs them.
"""
