"""`loadgen serve jax [flags]`: start the built-in JAX server in this process (servers.jax.serve.main).

    loadgen serve jax --preset small --port 8000 ─► servers.jax.serve.main(["--preset", "small", ...])

The flags after `jax` are the server's own (see `loadgen serve jax --help`); they are parsed by the server, so
both entry points accept and reject exactly the same things.
"""
from __future__ import annotations

import argparse

SERVERS = ("jax",)


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="run a built-in inference server (jax)",
                              description="Run a built-in OpenAI-compatible inference server.")
    p.add_argument("server", choices=SERVERS, help="which server: jax (the built-in JAX engine)")
    p.add_argument("server_args", nargs=argparse.REMAINDER,
                   help="the server's flags, e.g. --preset small --port 8000 (see `loadgen serve jax --help`)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from servers.jax import serve  # the server and jax are imported only when serving

    return serve.main(list(args.server_args), prog=f"loadgen serve {args.server}")
