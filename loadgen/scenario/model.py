"""Scenario model: what to measure, against what, under which load and SLOs.
The ``api`` section's models (``Api``, ``ResponseLimits``) live in ``loadgen.scenario.api``.

Precedence: model defaults, then the YAML file, then each ``--set key.path=value``.
Every model is strict (``extra="forbid"``) so a typo is an error, not a silent default.
``loadgen.scenario.loader`` reads a file or a dict (``load_scenario``, ``scenario_from_dict``) and
turns any problem into a ``ScenarioError`` whose message is one line naming the field
(``load.rate: Input should be greater than 0``); the CLI prints it and exits 2.
"""
from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import Field, field_validator, model_validator

from loadgen.scenario import limits
from loadgen.scenario.api import Api
from loadgen.scenario.hangups import Cancel, check_cancel
from loadgen.scenario.load_facts import LoadFacts
from loadgen.scenario.cost import Cost
from loadgen.scenario.dataset import Dataset, check_fits
from loadgen.scenario.server_traces import ServerTraces
from loadgen.scenario.audio import Audio, check as check_audio
from loadgen.scenario.strict import ScenarioError, Strict  # noqa: F401 (ScenarioError: re-exported)
from loadgen.scenario.structured import Tool, ToolChoice, check_tools
from loadgen.scenario.sweep import Sweep
from loadgen.scenario.target import Target


class Dist(Strict):
    """A token-length distribution. fixed: value; uniform: [min, max]; normal and lognormal:
    mean and std of the resulting lengths, clipped to [min, max]."""

    dist: Literal["fixed", "uniform", "normal", "lognormal"] = "fixed"
    value: Optional[int] = Field(None, gt=0)
    mean: Optional[float] = Field(None, gt=0)
    std: Optional[float] = Field(None, ge=0)
    min: int = Field(1, gt=0)
    max: Optional[int] = Field(None, gt=0)

    @model_validator(mode="after")
    def _params(self) -> "Dist":
        need = {"fixed": ["value"], "uniform": ["max"], "normal": ["mean", "std"],
                "lognormal": ["mean", "std"]}[self.dist]
        for name in need:
            if getattr(self, name) is None:
                raise ValueError(f"dist {self.dist} needs '{name}'")
        if self.max is not None and self.max < self.min:
            raise ValueError("max must be >= min")
        return self


class Seconds(Strict):
    """A duration distribution in seconds (think time): fixed value, uniform [min, max], or
    exponential with the given mean."""

    dist: Literal["fixed", "uniform", "exponential"] = "fixed"
    value: float = Field(0.0, ge=0)
    min: float = Field(0.0, ge=0)
    max: Optional[float] = Field(None, ge=0)
    mean: Optional[float] = Field(None, gt=0)

    @model_validator(mode="after")
    def _params(self) -> "Seconds":
        if self.dist == "uniform" and (self.max is None or self.max < self.min):
            raise ValueError("dist uniform needs 'max' >= 'min'")
        if self.dist == "exponential" and self.mean is None:
            raise ValueError("dist exponential needs 'mean'")
        return self


class Prefix(Strict):
    """Synthetic prefix groups: ``groups`` prefixes of ``tokens`` tokens; each request draws one
    (zipf: group k with probability ∝ 1/(k+1)^zipf_s; uniform) and puts it before its prompt."""

    groups: int = Field(gt=0)
    tokens: int = Field(gt=0)
    popularity: Literal["zipf", "uniform"] = "zipf"
    zipf_s: float = Field(1.1, gt=0)


class Images(Strict):
    """workload.images: ``count`` synthetic images (seeded, made locally) sent with each chat
    request as base64 data URLs (loadgen.scenario.images); ``pool`` distinct images are made
    once and dealt out in turn, so a server's image cache sees each one again after ``pool``
    images."""

    count: int = Field(1, ge=1, le=16)                 # images per request
    width: int = Field(512, ge=8, le=4096)
    height: int = Field(512, ge=8, le=4096)
    format: Literal["png", "jpeg"] = "png"
    pool: int = Field(16, ge=1, le=256)                # distinct images made up front


class Workload(Strict):
    source: Literal["synthetic", "jsonl", "sharegpt", "trace", "sessions"] = "synthetic"
    path: Optional[str] = None            # jsonl: {prompt, max_tokens} per line; sharegpt: JSON
    # trace (loadgen.scenario.trace): mooncake {timestamp ms, input_length, output_length,
    # hash_ids} or jsonl {timestamp ms, prompt | messages, max_tokens}; one hash id per block
    format: Literal["mooncake", "jsonl"] = "mooncake"
    block_tokens: int = Field(512, gt=0)
    # sessions (loadgen.scenario.sessions): ShareGPT conversations (path; every turn) or synthetic
    # (turns per session; user turns sized by prompt_tokens); the pause before each next turn
    turns: Dist = Field(default_factory=lambda: Dist(dist="fixed", value=3))
    think_time_s: Seconds = Field(default_factory=Seconds)
    prompt_tokens: Dist = Field(default_factory=lambda: Dist(dist="fixed", value=128))
    output_tokens: Dist = Field(default_factory=lambda: Dist(dist="fixed", value=128))
    output_tokens_from_file: bool = True  # jsonl/sharegpt: use the file's lengths when present
    shared_prefix_tokens: int = Field(0, ge=0)  # the same prefix in front of every prompt
    prefix: Optional[Prefix] = None       # prefix groups (one of G prefixes per request)
    # how prompt lengths are counted and built: "words" (common English words, ~1 BPE token
    # each: counts approximate), "bytes" (1 token per ASCII byte: the JAX server's synthetic
    # ByteTokenizer; exact) or a path to a HF tokenizer.json (exact for that tokenizer)
    tokenizer: str = "words"
    # api.endpoint embeddings: texts per request (the request's "input" list; 1 sends one string)
    inputs_per_request: int = Field(1, ge=1, le=2048)
    # chat: synthetic images with each request (content parts after the text)
    images: Optional[Images] = None
    # chat only: OpenAI tool specs sent with every request, inline (loadgen.scenario.structured);
    # streamed tool_calls deltas count as output, the final call's arguments are checked
    tools: Optional[list[Tool]] = None
    tool_choice: Optional[ToolChoice] = None      # auto | required | none | {type, function: {name}}
    seed: int = 0
    # prompts with expected answers (loadgen.scenario.dataset): each record gets ``correct``
    dataset: Optional[Dataset] = None
    audio: Optional[Audio] = None         # api.endpoint transcriptions: synthetic clips (audio.py)

    @model_validator(mode="after")
    def _path(self) -> "Workload":
        if self.source not in ("synthetic", "sessions") and not self.path:
            raise ValueError(f"source {self.source} needs 'path'")
        if self.prefix is not None and self.shared_prefix_tokens:
            raise ValueError("give 'prefix' (groups) or 'shared_prefix_tokens', not both")
        return self


class Stage(Strict):
    """One stage of a staged run for ``duration_s``: arrivals at ``rate`` (server) or
    ``concurrency`` virtual users (concurrency)."""

    rate: Optional[float] = Field(None, gt=0)
    concurrency: Optional[int] = Field(None, gt=0)
    duration_s: float = Field(gt=0)


class Probe(Strict):
    """load.probe: a light side stream beside the main load (loadgen.engine.aio.probe_stream): first
    ``alone_requests`` probes one after another with nothing else in flight, then, during the
    measured phase, one probe every 1/``rate`` s; reported apart (summary.json probe_stream)."""

    rate: float = Field(gt=0, le=100)              # probes/s during the measured phase
    prompt_tokens: int = Field(32, gt=0)
    output_tokens: int = Field(32, gt=1)           # > 1: a TPOT needs two tokens
    alone_requests: int = Field(8, ge=0, le=10_000)  # the baseline: probes with no main load


class Load(LoadFacts, Strict):
    """The load block; what its mode means: load_facts.LoadFacts (the properties others ask)."""

    mode: Literal["offline", "server", "concurrency", "trace"] = "server"
    rate: Optional[float] = Field(None, gt=0)         # requests/s (server)
    stages: Optional[list[Stage]] = None  # server: back-to-back stages instead of one rate
    time_scale: float = Field(1.0, gt=0)  # trace: multiplies the trace's gaps (0.5 = twice as fast)
    arrival: Literal["poisson", "constant", "gamma"] = "poisson"
    burstiness: float = Field(1.0, gt=0)   # gamma shape; 1 = Poisson, < 1 burstier
    concurrency: Optional[int] = Field(None, gt=0)    # in flight (offline, concurrency)
    max_concurrency: Optional[int] = Field(None, gt=0)  # optional cap in server mode
    num_requests: Optional[int] = Field(None, gt=0)   # measured requests (warm-up not counted)
    duration_s: Optional[float] = Field(None, gt=0)   # stop issuing after this long
    warmup_requests: int = Field(0, ge=0)
    min_duration_s: float = Field(0.0, ge=0)  # MLPerf-style minimums for a VALID verdict
    min_queries: int = Field(0, ge=0)
    drain_timeout_s: float = Field(600.0, gt=0)  # after the last send, wait this long at most
    seed: Optional[int] = None  # arrival-schedule seed; None: workload.seed + 1
    probe: Optional[Probe] = None  # a light side stream measured beside the main load
    cancel: Optional[Cancel] = None  # clients that hang up (loadgen.scenario.hangups)

    @model_validator(mode="after")
    def _mode(self) -> "Load":
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("give num_requests and/or duration_s to bound the run")
        if self.stages is not None:
            key = {"server": "rate", "concurrency": "concurrency"}.get(self.mode)
            if key is None or not self.stages:
                raise ValueError("'stages' needs mode server or concurrency and at least one stage")
            if any(getattr(s, key) is None for s in self.stages):
                raise ValueError(f"each stage of mode {self.mode} needs '{key}'")
            if getattr(self, key) is not None:
                raise ValueError(f"give '{key}' or 'stages', not both")
        elif self.mode == "server" and self.rate is None:
            raise ValueError("mode server needs 'rate' (or 'stages')")
        if self.mode == "concurrency" and self.concurrency is None and self.stages is None:
            raise ValueError("mode concurrency needs 'concurrency' (or 'stages')")
        if self.mode == "offline" and self.num_requests is None:
            raise ValueError("mode offline needs 'num_requests' (every request is issued at t0)")
        limits.check_plan(self)
        return self


class Slo(Strict):
    preset: Optional[str] = None          # e.g. server/llama3_1-8b (analysis.metrics.slo.PRESETS)
    ttft_ms: Optional[float] = Field(None, gt=0)
    tpot_ms: Optional[float] = Field(None, gt=0)
    itl_ms: Optional[float] = Field(None, gt=0)
    e2el_ms: Optional[float] = Field(None, gt=0)
    percentile: float = Field(99.0, gt=0, le=100)
    max_schedule_lag_ms: float = Field(10.0, gt=0)    # p99 schedule lag allowed in server runs
    min_rate_fraction: float = Field(0.95, gt=0, le=1)  # achieved / scheduled send rate

    @model_validator(mode="after")
    def _preset(self) -> "Slo":
        if self.preset is not None:
            from analysis.metrics.slo import PRESETS
            if self.preset not in PRESETS:
                raise ValueError(f"unknown preset '{self.preset}' (known: "
                                 f"{', '.join(sorted(PRESETS))})")
        return self


class Power(Strict):
    sources: list[Literal["none", "nvml", "amdsmi", "rapl", "dcgm", "estimate"]] = Field(
        default_factory=lambda: ["none"])
    gpu_indices: Optional[list[int]] = None   # the GPUs that serve the model; None: all
    sample_hz: float = Field(10.0, gt=0)
    idle_baseline_s: float = Field(0.0, ge=0)
    dcgm_url: Optional[str] = None           # Prometheus endpoint of a DCGM exporter
    rapl_root: str = "/sys/class/powercap"
    estimate_watts: Optional[float] = Field(None, gt=0)  # opt-in, labelled 'estimated'
    estimate_tdp_w: Optional[float] = Field(None, gt=0)  # opt-in: TDP x CPU load, 'estimated'
    dcgm_labels: dict[str, str] = Field(default_factory=dict)  # exporter labels that must match


class Output(Strict):
    dir: str = "runs"
    run_name: Optional[str] = None        # default: {YYYYmmdd-HHMMSS}-{name}; inside dir
    report: Literal["full", "text", "none"] = "full"  # report.md/html after the run; text: no plots
    # the records' store: records.jsonl, or records.arrow (columns, ~50 B a short record; issue
    # 42: native runs, --procs, Locust, server_traces, sweeps; docs/architecture.md "Run
    # directory")
    records: Literal["jsonl", "arrow"] = "jsonl"

    @field_validator("run_name")
    @classmethod
    def _inside_dir(cls, v: Optional[str]) -> Optional[str]:
        return limits.check_run_name(v)


MAX_PROCESSES = 1024          # client.processes: sender processes on one host


class Client(Strict):
    """How the client runs: ``processes`` sender processes (loadgen.engine.procs), each with its own
    event loop and connections, one share of the schedule each; ``auto``: the CPUs loadgen may
    use − 1 (at least 1). 1 (the default) is the one-process client."""

    processes: Union[Literal["auto"], int] = 1

    @field_validator("processes", mode="before")
    @classmethod
    def _count(cls, v):
        if v == "auto" and isinstance(v, str):
            return v
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_PROCESSES:
            raise ValueError(f"must be a whole number from 1 to {MAX_PROCESSES}, or auto "
                             f"(got {v!r})")
        return v


class Scenario(Strict):
    name: str = "scenario"
    description: str = ""
    target: Target
    api: Api = Field(default_factory=Api)
    workload: Workload = Field(default_factory=Workload)
    load: Load
    slo: Slo = Field(default_factory=Slo)
    power: Power = Field(default_factory=Power)
    sweep: Optional[Sweep] = None
    output: Output = Field(default_factory=Output)
    client: Client = Field(default_factory=Client)
    cost: Optional[Cost] = None      # prices for summary.json cost (loadgen.scenario.cost)
    server_traces: Optional[ServerTraces] = None     # the server's spans (OTLP), per request

    @field_validator("name")
    @classmethod
    def _name_fits(cls, v: str) -> str:
        return limits.check_name(v)

    @model_validator(mode="after")
    def _sweep_mode(self) -> "Scenario":
        sw = self.sweep
        if sw is not None:
            if sw.param == "load.rate" and self.load.mode != "server":
                raise ValueError("sweep: param load.rate needs load.mode server")
            if sw.param == "load.concurrency" and self.load.mode == "server":
                raise ValueError("sweep: param load.concurrency needs load.mode concurrency or "
                                 "offline (server mode sweeps load.rate)")
        if self.workload.source == "sessions":
            if self.api.endpoint != "chat":
                raise ValueError("workload.source sessions needs api.endpoint chat (each turn "
                                 "sends the conversation so far as messages)")
            if self.load.mode not in ("concurrency", "server") or self.load.stages:
                raise ValueError("workload.source sessions runs in load.mode concurrency (N "
                                 "concurrent sessions) or server (a rate of new sessions)")
        n_in = self.workload.inputs_per_request
        if n_in > 1 and self.api.endpoint != "embeddings":
            raise ValueError(f"workload.inputs_per_request: {n_in} inputs per request needs "
                             "api.endpoint: embeddings (completions and chat send one prompt)")
        if n_in > 1 and self.workload.source == "trace":
            raise ValueError("workload.inputs_per_request: a trace sends one row per request "
                             "(leave it at 1)")
        for key in ("ttft_ms", "tpot_ms", "itl_ms"):   # analysis.metrics.slo.STREAM_ONLY
            if getattr(self.slo, key) is not None and not self.api.stream:
                raise ValueError(f"slo.{key}: TTFT/TPOT/ITL need api.stream: true (a non-streamed "
                                 f"answer arrives whole, with no first-token time): set "
                                 f"api.stream: true or drop slo.{key}")
        if self.workload.images is not None:
            if self.api.endpoint != "chat":
                raise ValueError("workload.images: images go with api.endpoint chat (content "
                                 "parts of the user message)")
            if self.workload.source in ("trace", "sessions"):
                raise ValueError(f"workload.images: not with workload.source "
                                 f"{self.workload.source} (synthetic, jsonl or sharegpt prompts)")
        check_cancel(self)                          # load.cancel after_tokens needs a stream
        if self.load.probe is not None:
            if self.api.endpoint not in ("chat", "completions", "responses"):
                raise ValueError("load.probe: probes are generation requests (api.endpoint chat, "
                                 "completions or responses)")
            if not self.api.stream:
                raise ValueError("load.probe: a probe's TTFT/TPOT need api.stream: true")
        self._processes()
        self._structured()
        check_audio(self)
        if (self.load.mode == "trace") != (self.workload.source == "trace"):
            raise ValueError("load.mode trace and workload.source trace go together (the trace "
                             "file gives both the prompts and the send times)")
        return self

    @model_validator(mode="after")
    def _dataset(self) -> "Scenario":       # workload.dataset: loadgen.scenario.dataset
        check_fits(self.workload.dataset, self.workload, self.api)
        return self

    def _structured(self) -> None:
        """Tools and response_format are chat fields; the api carries them into the body."""
        w, a = self.workload, self.api
        check_tools(w.tools, w.tool_choice)
        for key, given in (("workload.tools", w.tools), ("workload.tool_choice", w.tool_choice),
                           ("api.response_format", a.response_format)):
            if given is not None and a.endpoint != "chat":
                raise ValueError(f"{key}: needs api.endpoint: chat (the {a.endpoint} endpoint "
                                 "takes no tools or response_format)")
        a._tools, a._tool_choice = w.tools, w.tool_choice
        a._mix_seed = self.load.seed if self.load.seed is not None else w.seed + 1   # seed_for's rule
        # a tool call or JSON answer ends when complete: with ignore_eos vLLM 0.32 generates on
        # past the grammar's end to max_tokens, and every answer fails its check ("Extra data");
        # so ignore_eos defaults to false here (an explicit api.ignore_eos: true is kept)
        if (w.tools or a.response_format is not None) and "ignore_eos" not in a.model_fields_set:
            a.ignore_eos = False

    def _processes(self) -> None:
        """An explicit client.processes > 1 must fit the run: sessions run in one process; a
        bound on requests in flight is shared out, so each process needs at least one."""
        n = self.client.processes
        if n == "auto" or n == 1:
            return
        if self.workload.source == "sessions":
            raise ValueError(f"client.processes: {n}: workload.source sessions runs in one "
                             "process (set client.processes: 1 or auto)")
        if self.load.probe is not None:
            raise ValueError(f"client.processes: {n}: load.probe runs in one process (set "
                             "client.processes: 1 or auto)")
        cap = self.load.in_flight_cap
        if cap is not None and n > cap:
            what = ("load.max_concurrency" if self.load.mode in ("server", "trace")
                    else "load.concurrency")
            raise ValueError(f"client.processes: {n} processes share {what} {cap} (each needs "
                             f"at least one request in flight): at most {cap}, or auto")
