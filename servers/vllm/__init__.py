"""servers.vllm: vLLM as a system under test that loadgen can start. Imports nothing of loadgen.

    spec (any object with vLLM's fields: model, dtype, slots, ...) ─► launch.py
        ─► launcher()        which `vllm` to run (PATH, or `python -m vllm.entrypoints.cli.main`)
        ─► build_vllm_argv() `vllm serve MODEL --host 127.0.0.1 --port P ...`
        ─► describe_server() version, flags, GPUs and driver ─► sut.json
    LaunchError: one line naming the field; loadgen.targets.managed turns it into a ScenarioError.
"""
