"""`python -m servers.jax` / `loadgen serve jax`: flags ─► build engine ─► HTTP up ─► warm-up ─► ready line.

    parse flags (bad flag → one-line error, exit 2) ─► servers.jax.build(...) ─► Orchestrator(engine)
    ─► aiohttp site on --host:--port (/health answers 503) ─► engine.warmup() on a worker thread
    ─► orchestrator.start(), /health 200, prints "servers.jax: ready on http://HOST:PORT ..."
    SIGINT/SIGTERM ─► /health 503, stop accepting, abort in-flight streams, stop the engine thread, exit 0
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from typing import Sequence

from servers.cli_args import parse_checked
from servers.jax.presets import PRESETS

log = logging.getLogger("servers.jax")

DTYPES = ("fp32", "bf16")
LOG_LEVELS = ("debug", "info", "warning", "error")
MATMUL_MODES = ("xla", "ffi", "auto")        # = servers.jax.kernels.MODES (not imported: it loads jax)


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr (no usage block), exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The server's flags (shared by `python -m servers.jax` and `loadgen serve jax`)."""
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="synthetic model preset with seeded random weights (default: tiny unless --model)")
    p.add_argument("--model", metavar="DIR", default=None,
                   help="local model directory (config.json, *.safetensors, tokenizer.json)")
    p.add_argument("--served-model-name", default=None,
                   help="model id in the API (default: preset/dir name); a,b: several ids, same weights")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="weight and KV-cache dtype (default: fp32 on CPU, bf16 on GPU/TPU)")
    p.add_argument("--slots", type=int, default=8, help="concurrent sequences in the decode batch (default 8)")
    p.add_argument("--max-model-len", type=int, default=None,
                   help="context length: prompt + generated tokens (default 1024)")
    p.add_argument("--interleave-chunk", type=int, default=16, metavar="N",
                   help="while streams decode, a new prompt is prefilled N tokens per decode step, "
                        "inside the step (lower: smoother ITL, later first token; 0: whole "
                        "prefills between steps; default 16)")
    p.add_argument("--prefix-cache", choices=("on", "off"), default="off",
                   help="automatic prefix caching (vLLM's): reuse the K/V of a prompt's cached "
                        "leading blocks; off by default, so the engine's prefill work never depends "
                        "on what was sent before (docs/guide.md)")
    p.add_argument("--prefix-block", type=int, default=16, metavar="N",
                   help="tokens per prefix-cache block (default 16, vLLM's block size)")
    p.add_argument("--prefix-cache-blocks", type=int, default=None, metavar="N",
                   help="blocks the prefix cache keeps, LRU (default: slots * max_model_len / "
                        "block, the KV cache's size again)")
    p.add_argument("--max-queue", type=int, default=256,
                   help="requests allowed to wait for a slot; more get 503 (default 256)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port, 0 = any free port (default 8000)")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on /v1/*")
    p.add_argument("--otlp-traces-endpoint", default=None, metavar="URL",
                   help="post one OpenTelemetry span per request that carries a W3C traceparent to this "
                        "OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318/v1/traces; vLLM's flag)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic weights (default 0)")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="the server's log level on stderr (default info)")
    p.add_argument("--matmul", choices=MATMUL_MODES, default="xla",
                   help="weight matmuls: xla (XLA's dot), ffi (servers/jax/kernels: AVX2 kernel for <= 96 "
                        "rows on XLA's intra-op threads (the CPUs this process may use), built with "
                        "g++ on first use), auto (per shape, whichever "
                        "timed faster at warm-up); default xla; docs/kernels.md")


def build_parser(prog: str = "servers.jax") -> argparse.ArgumentParser:
    p = _OneLineParser(prog=prog, description="OpenAI-compatible server over the built-in JAX engine")
    add_arguments(p)
    return p


def check_args(args: argparse.Namespace) -> str | None:
    """One-line message naming the bad flag, or None."""
    if args.preset is not None and args.model is not None:
        return "--preset and --model are mutually exclusive"
    if args.model is not None and not os.path.isdir(args.model):
        return f"--model: {args.model!r} is not a directory"
    if args.slots < 1:
        return f"--slots: must be >= 1, got {args.slots}"
    if args.interleave_chunk < 0:
        return f"--interleave-chunk: must be >= 0, got {args.interleave_chunk}"
    if args.prefix_block < 1:
        return f"--prefix-block: must be >= 1, got {args.prefix_block}"
    if args.prefix_cache_blocks is not None and args.prefix_cache_blocks < 1:
        return f"--prefix-cache-blocks: must be >= 1, got {args.prefix_cache_blocks}"
    if args.prefix_cache == "on" and args.interleave_chunk == 0:
        return "--prefix-cache on needs --interleave-chunk > 0 (a hit's rest is prefilled in those pieces)"
    if args.max_queue < 1:
        return f"--max-queue: must be >= 1, got {args.max_queue}"
    if args.max_model_len is not None and args.max_model_len < 2:
        return f"--max-model-len: must be >= 2, got {args.max_model_len}"
    if not 0 <= args.port <= 65535:
        return f"--port: must be in [0, 65535], got {args.port}"
    if args.served_model_name is not None and not all(n.strip() == n and n
                                                      for n in args.served_model_name.split(",")):
        return f"--served-model-name: empty or padded name in {args.served_model_name!r} (a,b)"
    if args.api_key is not None and not args.api_key.strip():
        return "--api-key: must not be empty"
    if args.otlp_traces_endpoint is not None and not args.otlp_traces_endpoint.startswith(("http://", "https://")):
        return f"--otlp-traces-endpoint: an http:// or https:// URL, got {args.otlp_traces_endpoint!r}"
    return None


def main(argv: Sequence[str] | None = None, prog: str = "servers.jax") -> int:
    args, status = parse_checked(build_parser(prog), argv, check_args, prog)
    if args is None:
        return status
    return run(args, prog)


def _interrupt(signum, frame):  # SIGTERM before the event loop runs: same path as Ctrl-C
    raise KeyboardInterrupt


def run(args: argparse.Namespace, prog: str = "servers.jax") -> int:
    """Build the engine and serve until SIGINT/SIGTERM; returns the exit code (0 on a signal)."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args, prog)
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted before serving; exiting\n")
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, prog: str) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    if args.log_level != "debug":
        logging.getLogger("jax").setLevel(logging.WARNING)  # e.g. "Unable to initialize backend 'tpu'"
    from servers.jax import build  # imports jax: keep `--help` and flag errors fast

    preset = args.preset if args.preset is not None or args.model is not None else "tiny"
    t0 = time.perf_counter()
    try:
        kw = {"interleave_chunk": args.interleave_chunk, "prefix_cache": args.prefix_cache == "on",
              "prefix_block": args.prefix_block, "prefix_cache_blocks": args.prefix_cache_blocks}
        if args.max_model_len is not None:
            kw["max_model_len"] = args.max_model_len
        engine, tokenizer, describe = build(preset=preset, model_dir=args.model, dtype=args.dtype,
                                            slots=args.slots, seed=args.seed, warmup=False, **kw)
    except (ValueError, OSError, KeyError) as e:
        sys.stderr.write(f"{prog}: error: cannot build the model: {e}\n")
        return 2
    log.info("model built in %.1f s", time.perf_counter() - t0)
    from servers.jax import kernels
    try:
        describe["matmul"] = kernels.configure(args.matmul)     # before warm-up traces any model function
    except ValueError as e:                                      # e.g. SERVERS_JAX_MATMUL_THREADS=two
        sys.stderr.write(f"{prog}: error: {e}\n")
        return 2
    log.info("matmul: %s%s", kernels.mode(), f" (asked {args.matmul})" if kernels.mode() != args.matmul else "")
    name = args.served_model_name or (preset if args.model is None
                                      else os.path.basename(os.path.normpath(args.model)))
    try:
        return asyncio.run(_serve(args, engine, tokenizer, describe, name, prog))
    except OSError as e:  # e.g. the port is taken
        sys.stderr.write(f"{prog}: error: cannot listen on {args.host}:{args.port}: {e}\n")
        return 1


async def _serve(args: argparse.Namespace, engine, tokenizer, describe: dict, name: str, prog: str) -> int:
    from aiohttp import web

    from servers.jax.api import STATE, abort_all, create_app, set_ready
    from servers.jax.orchestrator import Orchestrator

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    orch = Orchestrator(engine, max_queue=args.max_queue)
    dtype = describe.get("dtype", args.dtype)
    settings = {"host": args.host, "port": args.port, "slots": args.slots, "max_queue": args.max_queue,
                "dtype": dtype, "seed": args.seed, "pid": os.getpid(), "prefix_cache": args.prefix_cache}
    app = create_app(orch, tokenizer, describe, model_name=name, max_model_len=int(engine.max_model_len),
                     api_key=args.api_key, settings=settings, otlp_traces_endpoint=args.otlp_traces_endpoint)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        port = runner.addresses[0][1]
        app_settings = app[STATE].settings
        app_settings["port"] = port
        log.info("listening on http://%s:%d (warming up)", args.host, port)
        warm = loop.run_in_executor(None, getattr(engine, "warmup", lambda: 0.0))
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({warm, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set():
            try:
                compile_s = warm.result()
            except Exception as e:  # noqa: BLE001 - report in one line, exit non-zero
                sys.stderr.write(f"{prog}: error: warm-up failed: {type(e).__name__}: {e}\n")
                return 1
            app_settings["warmup_s"] = round(float(compile_s or 0.0), 3)
            describe["compile_s"] = app_settings["warmup_s"]
            from servers.jax import kernels
            describe["matmul"] = kernels.describe()       # with the per-shape choices made while tracing
            orch.start()
            set_ready(app)
            print(f"{prog}: ready on http://{args.host}:{port} model={name} slots={args.slots} "
                  f"max_model_len={engine.max_model_len} dtype={dtype} warmup={app_settings['warmup_s']}s",
                  flush=True)
            await waiter
        log.info("shutting down")
        set_ready(app, False)
        for s in list(runner.sites):
            await s.stop()  # stop accepting connections
        abort_all(app)
        await loop.run_in_executor(None, orch.stop)
        if not warm.done():
            await warm  # a warm-up in progress cannot be interrupted; let it end before exiting
    finally:
        await runner.cleanup()
    print(f"{prog}: stopped", flush=True)
    return 0
