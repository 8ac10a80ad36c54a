"""servers: systems under test that loadgen can start. Each runs as its own process; never imports
loadgen or analysis (tests/test_layering.py).

    servers/jax/    the built-in JAX engine (continuous batching, KV cache, OpenAI-compatible API)
    servers/vllm/   vLLM's `vllm serve` command line and its self-description (launch helpers)
    servers/calib/  a calibration server whose TTFT/ITL and faults are set by flags or per request,
                    logging each write on the client's clock (`loadgen serve calib`, docs/calib.md)
    routes.py       the OpenAI paths both HTTP servers answer, registered once
    otlp.py         a server's own span per traced request, posted as OTLP/JSON (calib/, jax/)
"""
