"""Start and stop one real server on 127.0.0.1 (a free port), wait until it answers, tell its version.

    start(name) ─► free port ─► Popen(argv, own session = own process group, log → <cache>/logs/)
                ─► poll GET health_path every 0.5 s until 200 (bounded: startup_s), or the process died
                ─► version: vLLM GET /version | llama.cpp `llama-server --version` | transformers import
                ─► warm-up: one 2-token completion (transformers serve loads lazily; others compile)
                ─► Running(name, url, model, version, ...)
    stop()      SIGTERM to the process group ─► wait 20 s ─► SIGKILL ─► wait

    name          argv (the model: bench/compat/models.py)                          health    /metrics
    vllm          vllm serve <hf dir> --load-format dummy --dtype float32            /health   yes
                  --max-model-len 4096 (env VLLM_CPU_KVCACHE_SPACE=2), then per variant:
                    generate  (nothing more: text, Responses API)
                    tools     --enable-auto-tool-choice --tool-call-parser hermes
                              --structured-outputs-config '{"backend": "xgrammar", "disable_any_whitespace": true}'
                    embed     --runner pooling --convert embed        (warm-up: /v1/embeddings)
                    vision    <small-vl dir> --limit-mm-per-prompt '{"image": 1}'
                    spec      --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, ...}'
                    lora      --enable-lora --max-lora-rank 8 --max-loras 2 --lora-modules a=<dir> b=<dir>
                              (bench/compat/lora.py: random-weight adapters made here)
    llama.cpp     llama-server -m <f32 gguf> -c 1024·np -np 8 --metrics -t 2         /health   yes (--metrics)
    transformers  transformers serve <hf dir> --device cpu --dtype float32          /health   no

Use: ``with Server("vllm") as s: s.url, s.model, s.version``.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from bench.compat import install, models
from bench.compat.paths import cache_dir

NAMES = ("vllm", "llama.cpp", "transformers")
# vLLM starts: one model and one set of flags each (a pooling runner cannot also generate)
VLLM_VARIANTS: dict[str, list] = {
    "generate": [],
    # tool_choice auto needs a parser (required / named: a structural tag in the parser's format);
    # whitespace inside JSON off: a random-weight model otherwise fills max_tokens with it. Its own
    # start: with these flags vLLM streams no chunk for a special token (the plain start sends "")
    "tools": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes",
              "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'],
    "embed": ["--runner", "pooling", "--convert", "embed"],
    "vision": ["--limit-mm-per-prompt", '{"image": 1}'],     # BLIP-2 takes one image a prompt
    # n-gram speculation (prompt lookup): vllm:spec_decode_* counters on /metrics
    "spec": ["--speculative-config",
             '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'],
    # two random-weight adapters (bench/compat/lora.py), served as models "a" and "b"
    "lora": ["--enable-lora", "--max-lora-rank", "8", "--max-loras", "2", "--lora-modules"],
}
HAS_METRICS = {"vllm": True, "llama.cpp": True, "transformers": False}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, body: Optional[dict] = None, timeout: float = 10.0) -> tuple[int, bytes]:
    """GET (or POST JSON) ``url``; (status, body); (0, b"") when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, ValueError):
        return 0, b""


@dataclass
class Spec:
    argv: list
    env: dict
    model: str
    startup_s: float
    health: str = "/health"


def vllm_args(variant: str) -> tuple[str, list]:
    """The model dir and the variant's own flags (after the common ones) of a vLLM start."""
    if variant not in VLLM_VARIANTS:
        raise ValueError(f"unknown vllm variant {variant!r}; one of {', '.join(VLLM_VARIANTS)}")
    d = models.make_vision() if variant == "vision" else models.make_hf()
    if variant == "lora":
        from bench.compat import lora
        return str(d), VLLM_VARIANTS[variant] + [f"{n}={p}" for n, p in lora.make_all().items()]
    return str(d), VLLM_VARIANTS[variant]


def spec(name: str, port: int, slots: int = 8, variant: str = "generate") -> Spec:
    """How to start ``name`` on ``port``; installs it and makes its model when missing.
    ``slots``: llama.cpp's parallel sequences (-np), each with a 1024-token context (-c = 1024·slots).
    ``variant`` (vLLM only): generate | embed | vision (VLLM_VARIANTS)."""
    info = install.ensure(name)
    if name == "vllm":
        d, extra = vllm_args(variant)
        return Spec([info["executable"], "serve", d, "--host", "127.0.0.1", "--port", str(port),
                     "--load-format", "dummy", "--dtype", "float32", "--max-model-len", "4096",
                     "--disable-uvicorn-access-log", *extra],
                    {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                     "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, d, startup_s=420)
    if name == "llama.cpp":
        g = str(models.make_gguf())
        return Spec([info["executable"], "-m", g, "--host", "127.0.0.1", "--port", str(port), "-c", str(1024 * slots),
                     "-np", str(slots), "--metrics", "-t", "2", "--alias", "small-f32"],
                    {}, "small-f32", startup_s=120)
    if name == "transformers":
        d = str(models.make_hf())
        return Spec([info["executable"], "serve", d, "--host", "127.0.0.1", "--port", str(port),
                     "--device", "cpu", "--dtype", "float32", "--log-level", "info"],
                    {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, d, startup_s=180)
    raise ValueError(f"unknown server {name!r}; one of {NAMES}")


@dataclass
class Server:
    name: str
    port: Optional[int] = None
    warm: bool = True
    proc: Optional[subprocess.Popen] = None
    model: str = ""
    version: str = ""
    argv: list = field(default_factory=list)
    log_path: Optional[Path] = None
    startup_s: float = 0.0
    slots: int = 8                # llama.cpp -np
    variant: str = "generate"     # vLLM: VLLM_VARIANTS

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def has_metrics(self) -> bool:
        return HAS_METRICS[self.name]

    def start(self) -> "Server":
        self.port = self.port or free_port()
        sp = spec(self.name, self.port, self.slots, self.variant)
        self.model, self.argv = sp.model, [str(a) for a in sp.argv]
        logs = cache_dir() / "logs"
        logs.mkdir(exist_ok=True)
        self.log_path = logs / (f"{self.name}.log" if self.variant == "generate"
                                else f"{self.name}-{self.variant}.log")
        t0 = time.monotonic()
        with open(self.log_path, "w") as log:
            log.write("$ " + " ".join(self.argv) + "\n")
            log.flush()
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, **sp.env}, start_new_session=True)
        try:
            self._wait_healthy(sp, t0)
            self.version = self._version()
            if self.warm:
                self._warm_up()
        except BaseException:
            self.stop()
            raise
        self.startup_s = round(time.monotonic() - t0, 1)
        return self

    def _wait_healthy(self, sp: Spec, t0: float) -> None:
        while time.monotonic() - t0 < sp.startup_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} while starting; "
                                   f"log tail:\n{self.log_tail()}")
            if http(self.url + sp.health, timeout=2)[0] == 200:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not healthy within {sp.startup_s:g} s; log tail:\n{self.log_tail()}")

    def _version(self) -> str:
        if self.name == "vllm":
            st, b = http(self.url + "/version")
            return json.loads(b).get("version", "") if st == 200 else ""
        if self.name == "llama.cpp":
            return install.check_llama_cpp(cache_dir() / "llama.cpp")
        return install.check_transformers(cache_dir() / "transformers")

    def _warm_up(self) -> None:
        if self.variant == "embed":
            path, body = "/v1/embeddings", {"model": self.model, "input": "the of and"}
        else:
            path = "/v1/chat/completions"
            body = {"model": self.model, "messages": [{"role": "user", "content": "the of and"}], "max_tokens": 2}
        st, b = http(self.url + path, body, timeout=300)
        if st != 200:
            raise RuntimeError(f"{self.name} warm-up answered {st}: {b[:500]!r}")

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        # the group may have children that outlived the leader (vLLM's engine core): make sure
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    """``python -m bench.compat.servers NAME`` starts it, prints its URL and version, stops on Ctrl-C
    (or after --hold-s seconds)."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("name", choices=NAMES)
    ap.add_argument("--hold-s", type=float, default=3600.0)
    ap.add_argument("--variant", default="generate", choices=list(VLLM_VARIANTS), help="vLLM only")
    a = ap.parse_args(argv)

    def _stop(*_):          # SIGTERM (a background job ignores SIGINT): stop the server too
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _stop)
    with Server(a.name, variant=a.variant) as s:
        print(json.dumps({"url": s.url, "model": s.model, "version": s.version, "startup_s": s.startup_s}),
              flush=True)
        try:
            time.sleep(a.hold_s)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
