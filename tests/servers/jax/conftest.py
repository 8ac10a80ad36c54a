"""The JAX server tests' fixtures live in tests/conftest.py (``jax_server``: the session's shared real
server; ``jax_cache_dir``: the session's compilation cache) and tests/servers/jax/server_proc.py
(``start_server`` for a server with flags of its own). Nothing here but the names old importers used."""
from tests.servers.jax.server_proc import HOST, REPO, TINY_ARGS, ServerProc, free_port, start_server

__all__ = ["HOST", "REPO", "TINY_ARGS", "ServerProc", "free_port", "start_server"]
