"""`python -m servers.calib` / `loadgen serve calib`: flags ─► app ─► listen ─► ``PORT <n>`` line.

    --ttft-ms, --itl-ms, --tokens-per-chunk, --lockstep ─► the defaults of every answer
    --port (0: any free port) ─► aiohttp site on --host ─► stdout "PORT <n>" (what
    CalibrationServer reads), stderr a ready line with the URL and the timing
    SIGINT/SIGTERM ─► exit 0
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Optional, Sequence

from aiohttp import web

from servers.calib.app import make_app
from servers.cli_args import parse_checked


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr (no usage block), exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser(prog: str = "servers.calib") -> argparse.ArgumentParser:
    ap = _OneLineParser(prog=prog, description=(
        "An OpenAI-compatible server whose timing is known: the first token ttft_ms after the "
        "request arrives, then one every itl_ms. Point your load tester at it and compare what it "
        "measures with these numbers (GET /calib/log has the server's own write times)."))
    ap.add_argument("--ttft-ms", type=float, default=0.0, help="time to first token (default 0)")
    ap.add_argument("--itl-ms", type=float, default=0.0, help="time between tokens (default 0)")
    ap.add_argument("--tokens-per-chunk", type=int, default=1, help="tokens per SSE chunk (default 1)")
    ap.add_argument("--lockstep", action="store_true",
                    help="content chunks of all streams on one global decode clock (continuous "
                         "batching: every itl_ms one step writes the next chunk of every stream)")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=8000, help="TCP port, 0 = any free port (default 8000)")
    ap.add_argument("--no-log", action="store_true", help="keep no per-request log: GET /calib/log stays empty (capacity runs)")
    ap.add_argument("--cpu", type=int, default=None, help="pin the server to this CPU")
    ap.add_argument("--models", default=None,
                    help="comma-separated model ids /v1/models lists (default calib-model); a request "
                         "naming another gets vLLM's 404; each answer echoes the requested model")
    ap.add_argument("--otlp-endpoint", default=None, metavar="URL",
                    help="post one OTLP/JSON span per request that carries a traceparent to URL "
                         "(http://host:port/v1/traces), with known queue and prefill times "
                         "(servers/calib/spans.py; GET /calib/spans lists what was sent)")
    return ap


def check_args(args: argparse.Namespace) -> Optional[str]:
    """The one-line problem with the flags, or None."""
    for flag, v in (("--ttft-ms", args.ttft_ms), ("--itl-ms", args.itl_ms)):
        if not v >= 0:
            return f"{flag}: must be >= 0, got {v:g}"
    if args.tokens_per_chunk < 1:
        return f"--tokens-per-chunk: must be >= 1, got {args.tokens_per_chunk}"
    if not 0 <= args.port <= 65535:
        return f"--port: must be 0..65535, got {args.port}"
    if args.otlp_endpoint is not None and not args.otlp_endpoint.startswith(("http://", "https://")):
        return f"--otlp-endpoint: an http:// or https:// URL, got {args.otlp_endpoint!r}"
    if args.models is not None and not all(m.strip() for m in args.models.split(",")):
        return f"--models: an empty model id in {args.models!r}"
    return None


async def _serve(args: argparse.Namespace) -> None:
    defaults = {"ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms, "tokens_per_chunk": args.tokens_per_chunk,
                "lockstep": args.lockstep}
    models = [m.strip() for m in args.models.split(",")] if args.models else None
    runner = web.AppRunner(make_app(defaults, log=not args.no_log, models=models,
                                    otlp_endpoint=args.otlp_endpoint), access_log=None,
                           handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=4096)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    mode = ", lockstep" if args.lockstep else ""
    print(f"servers.calib: ready on http://{args.host}:{port} (model {args.models or 'calib-model'}, TTFT "
          f"{args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms{mode}; log: GET /calib/log)",
          file=sys.stderr, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: Optional[Sequence[str]] = None, prog: str = "servers.calib") -> int:
    args, status = parse_checked(build_parser(prog), argv, check_args, prog)
    if args is None:
        return status
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass
    except OSError as e:                 # the port is taken, the host is not ours
        sys.stderr.write(f"{prog}: error: --port {args.port}: {e.strerror or e}\n")
        return 2
    return 0
