"""servers: systems under test that loadgen can start. Each is its own process; never imports loadgen.

    servers/jax/   the built-in JAX engine (continuous batching, KV cache, OpenAI-compatible API)
"""
