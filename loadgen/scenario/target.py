"""The scenario's ``target``: a running server's URL, or a server that ``loadgen run`` manages.

    target: {url: http://127.0.0.1:8000}                      an external server (any OpenAI API)
    target: {urls: [http://127.0.0.1:8000, http://127.0.0.1:8001],   several replicas, the client
             balance: round_robin | least_in_flight}              balances (loadgen.client.balance)
    target: {server: {kind: jax | vllm | command, ...}}       started, health-checked, stopped
"""
from __future__ import annotations

import os
from typing import Any, Literal, Optional
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, field_validator, model_validator

from loadgen.scenario.strict import Strict


class ServerSpec(Strict):
    """A server that ``loadgen run`` starts, health-checks and stops."""

    kind: Literal["jax", "vllm", "command"] = "jax"
    preset: str = "small"                 # jax: a name from servers.jax.presets
    model: Optional[str] = None           # jax: local HF directory; vllm: model path/name
    dtype: Optional[str] = None           # fp32 | bf16 (jax); vllm's --dtype
    slots: Optional[int] = Field(None, gt=0)        # jax: decode batch slots
    max_model_len: Optional[int] = Field(None, gt=0)
    max_queue: Optional[int] = Field(None, gt=0)    # jax: waiting-queue bound (503 beyond)
    interleave_chunk: Optional[int] = Field(None, ge=0)  # jax: prompt tokens per decode step
                                                          # while streams decode (0: whole prefills)
    matmul: Optional[Literal["xla", "ffi", "auto"]] = None  # jax: weight matmuls (docs/kernels.md)
    port: Optional[int] = Field(None, gt=0, lt=65536)  # None: a free port is picked
    args: dict[str, Any] = Field(default_factory=dict)  # extra CLI flags, key -> value
    command: Optional[list[str]] = None   # kind=command: argv; "{port}" is substituted
    # vllm only: --tensor-parallel-size, --gpu-memory-utilization, --load-format
    tensor_parallel_size: Optional[int] = Field(None, gt=0)
    gpu_memory_utilization: Optional[float] = Field(None, gt=0, le=1)
    load_format: Optional[str] = None
    # vllm only: which vLLM to run — a `vllm` executable, a Python interpreter whose environment
    # has vLLM (run as `python -m vllm.entrypoints.cli.main`), or a venv directory (its bin/vllm,
    # else bin/python); "~" is expanded, a bare name is looked up on PATH. None: `vllm` on PATH,
    # else loadgen's own interpreter
    executable: Optional[str] = None
    health_path: str = "/health"
    startup_timeout_s: float = Field(900.0, gt=0)
    # added to loadgen's environment for the server process (and its `vllm --version` probe);
    # recorded in server.json with secret-looking values redacted
    env: dict[str, str] = Field(default_factory=dict)
    # pin the server to these CPUs (os.sched_setaffinity); loadgen then runs on the others,
    # so client and server do not share cores (recorded in meta.json)
    cpus: Optional[list[int]] = None

    @field_validator("model")
    @classmethod
    def _home(cls, v: Optional[str]) -> Optional[str]:
        """A directory given from the home (``~/…``; docs/vllm.md) reaches the server expanded:
        vLLM would take ``~/…`` for a Hub repo id; a Hub id never starts with ``~``."""
        return os.path.expanduser(v) if v and v.startswith("~") else v

    @model_validator(mode="after")
    def _kind_fields(self) -> "ServerSpec":
        if self.kind != "vllm":
            for name in ("tensor_parallel_size", "gpu_memory_utilization", "load_format",
                         "executable"):
                if getattr(self, name) is not None:
                    raise ValueError(f"'{name}' applies to kind vllm only")
        if self.kind == "command" and not self.command:
            raise ValueError("kind command needs 'command' (an argv list; \"{port}\" is substituted)")
        if self.cpus is not None:
            if not self.cpus or any(c < 0 for c in self.cpus):
                raise ValueError("cpus must be a non-empty list of CPU numbers")
            try:
                have = os.sched_getaffinity(0)
            except (AttributeError, OSError):
                have = None
            if have is not None and not set(self.cpus) <= have:
                raise ValueError(f"cpus {self.cpus} not all available here "
                                 f"(this process may use {sorted(have)})")
        if self.kind == "vllm" and not self.model:
            raise ValueError("kind vllm needs 'model' (a local path or model name)")
        return self


def _check_base_url(v: str) -> str:
    """An http(s):// base URL; one that ends in /v1 is the API's root, not the server's."""
    p = urlsplit(v)
    if "@" in p.netloc:             # never echoed: the password would land on the terminal
        raise ValueError("holds credentials (user:password@host): loadgen neither sends nor "
                         "writes them; give api.headers.Authorization or api.api_key_env "
                         "instead (docs/secrets.md)")
    if p.query or p.fragment:       # loadgen appends /v1/...: a query here is never sent right
        raise ValueError("has a query string or fragment (?... / #...): give the server's base "
                         "URL; secrets go in api.headers or api.api_key_env (docs/secrets.md)")
    if p.scheme not in ("http", "https") or not p.netloc:
        hint = f"http://{v}" if "://" not in v else "http://HOST:PORT"
        raise ValueError(f"'{v}' is not an http:// or https:// URL (e.g. {hint})")
    if p.path.rstrip("/").endswith("/v1"):
        base = urlunsplit((p.scheme, p.netloc, p.path.rstrip("/")[:-3], "", ""))
        raise ValueError(f"'{v}' ends in /v1: give the server's base URL, {base} "
                         "(loadgen adds /v1/completions, /v1/models itself)")
    return v


class Target(Strict):
    url: Optional[str] = None             # base URL of a running server, e.g. http://127.0.0.1:8000
    # several replicas of one model behind no gateway: the client spreads the requests over them
    # (round_robin: in the order requests are sent; least_in_flight: to the URL with the fewest
    # requests in flight, ties in turn); every record names its URL (``target_url``)
    urls: Optional[list[str]] = None
    balance: Literal["round_robin", "least_in_flight"] = "round_robin"
    server: Optional[ServerSpec] = None
    # the server's Prometheus endpoint, scraped during the run into server_metrics.jsonl by a
    # separate process (the parse never holds the client's GIL); metrics_path: a path on the
    # target, or a full http(s):// URL for a server that exposes metrics on another port
    scrape_metrics: bool = True
    metrics_path: str = "/metrics"
    metrics_interval_s: float = Field(1.0, gt=0)
    # how many accelerators (GPUs, chips) serve the target: the per-accelerator figures divide
    # by it (analysis/metrics/capacity.py; written to sut.json); a whole number >= 1
    accelerators: int = 1

    @field_validator("accelerators", mode="before")
    @classmethod
    def _accelerators(cls, v):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"must be a whole number >= 1 (got {v!r})")
        return v

    @field_validator("url")
    @classmethod
    def _base_url(cls, v: Optional[str]) -> Optional[str]:
        return v if v is None else _check_base_url(v)

    @field_validator("urls")
    @classmethod
    def _base_urls(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        if v is None:
            return v
        if not v:
            raise ValueError("give at least one URL")
        out = [_check_base_url(u).rstrip("/") for u in v]
        dup = sorted({u for u in out if out.count(u) > 1})
        if dup:
            raise ValueError(f"{dup[0]} is listed twice")
        return out

    @model_validator(mode="after")
    def _one_of(self) -> "Target":
        given = [k for k in ("url", "urls", "server") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of target.url, target.urls or target.server")
        return self

    @property
    def primary_url(self) -> Optional[str]:
        """target.url, or the first of target.urls (readiness and /v1/models are asked there
        first; server metrics are scraped there); None for a managed server."""
        return self.urls[0] if self.urls else self.url

    @property
    def replica_urls(self) -> Optional[list[str]]:
        """target.urls when there are several replicas to balance over, else None."""
        return list(self.urls) if self.urls and len(self.urls) > 1 else None
