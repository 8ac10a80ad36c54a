"""`loadgen serve jax|calib [flags]`: start a built-in server in this process.

    loadgen serve jax --preset small --port 8000 ─► servers.jax.serve.main(["--preset", "small", ...])
    loadgen serve calib --ttft-ms 50 --itl-ms 10 [--lockstep] [--port P]
        ─► servers.calib.serve.main([...]): a server whose timing you know, to check a harness

The flags after the server's name are the server's own (see `loadgen serve jax --help`); they are
parsed by the server, so both entry points (`python -m servers.X`) accept and reject exactly the
same things.
"""
from __future__ import annotations

import argparse
from loadgen.commands import subcommand

SERVERS = ("jax", "calib")


def register(subparsers) -> None:
    p = subcommand(subparsers, "serve", main)
    p.add_argument("server", choices=SERVERS,
                   help="jax (the built-in JAX engine) or calib (known TTFT/ITL: --ttft-ms, --itl-ms)")
    rest = p.add_argument("server_args", nargs=argparse.REMAINDER, metavar="FLAGS",
                          help="the server's own flags, optional, e.g. --preset small --port 8000 "
                               "(see `loadgen serve jax --help`, `loadgen serve calib --help`)")
    rest.required = False       # argparse counts a REMAINDER as required: `serve jax` is enough


def main(args: argparse.Namespace) -> int:
    prog = f"loadgen serve {args.server}"
    if args.server == "calib":
        from servers.calib import serve as calib   # aiohttp only: no jax import
        return calib.main(list(args.server_args), prog=prog)
    from servers.jax import serve  # the server and jax are imported only when serving
    return serve.main(list(args.server_args), prog=prog)
