"""summary.json's blocks of the per-feature figures (load.cancel, api.retry, audio, api.models, energy),
and the check that a summary holds no NaN / Infinity.

    analysis.metrics.hangups / audio / models ─► these blocks ─► analysis.contract.summary.Summary
    summary.json read ─► nonfinite_keys ─► [] (written by loadgen), else the edited keys
        ─► analysis.metrics.summary.load_summary / open_run: recomputed from the records

Open blocks (like Accuracy and CostBlock): the keys readers use are named and typed, the rest
kept as computed.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import Field

from analysis.contract.base import Model, Open, StatusBlock
from analysis.contract.stats import P50P99, Spread
from analysis.contract.summary_workload import RequestCounts

Num = Union[int, float]          # a limit as the scenario gave it (200 stays 200)


class ModelFigures(RequestCounts):
    """One model of api.models (analysis.metrics.models): a replica's figures, without a url."""
    share: Optional[float] = None
    ttft_ms: Optional[P50P99] = None
    tpot_ms: Optional[P50P99] = None
    itl_ms_p99: Optional[float] = None
    e2el_ms_p50: Optional[float] = None
    request_throughput: Optional[float] = None
    output_throughput: Optional[float] = None
    goodput: Optional[float] = None


class RunningAfter(Open):
    """meta.json's running_after (loadgen.run.running_after): the server's running gauge."""
    metric: Optional[str] = None
    value: Optional[Any] = Field(None, description="a number once checked (leaked not null)")
    waited_s: Optional[Any] = None
    leaked: Optional[bool] = None
    reason: Optional[str] = None


class Cancel(Open):
    """load.cancel (analysis.metrics.hangups.cancel_block): the requests the client hung up on."""
    requests_aborted: int = 0
    with_first_token: int = 0
    ttft_ms: Optional[P50P99] = Field(None, description="stats of their TTFT (ms)")
    ttft_rule: Optional[str] = None
    output_tokens_received: int = 0
    server_running_after: Optional[RunningAfter] = Field(
        None, description="meta.json's running_after: the server's running gauge after the run")
    leaked: Optional[bool] = None


class Retries(Open):
    """api.retry (analysis.metrics.hangups.retries_block): requests sent more than once."""
    requests: int = 0
    attempts: int = 0
    wait_s: Optional[float] = None


class Audio(Open):
    """api.endpoint transcriptions (analysis.metrics.audio): RTFx, audio seconds sent."""
    rtfx: Optional[float] = None
    rtfx_reason: Optional[str] = None
    rtfx_per_request: Optional[Spread] = None
    audio_s_total: Optional[float] = None
    audio_s_per_request: Optional[float] = None
    requests: int = 0
    requests_sent: int = 0
    seconds: Optional[Any] = Field(None, description="workload.audio as given (meta.json)")
    sample_rate: Optional[Any] = None
    format: Optional[Any] = None
    pool: Optional[Any] = None
    rule: Optional[str] = None


class Slo(Open):
    """The effective SLO (analysis.metrics.slo.resolve_slo): a preset's limits, overridden by
    any given explicitly; ``source`` says where they came from."""
    preset: Optional[str] = None
    ttft_ms: Optional[Num] = None
    tpot_ms: Optional[Num] = None
    itl_ms: Optional[Num] = None
    e2el_ms: Optional[Num] = None
    percentile: Optional[Num] = None
    max_schedule_lag_ms: Optional[Num] = None
    min_rate_fraction: Optional[Num] = None
    source: Optional[str] = None
    error: Optional[str] = Field(None, description="an unknown preset: the error, and no limit")


class EnergySeries(Open):
    """One power source/device over the window (analysis.energy.window)."""
    source: Optional[str] = None
    device: Optional[Any] = None
    scope: Optional[str] = None
    method: Optional[str] = None
    evidence: Optional[str] = None
    energy_j: Optional[float] = None
    avg_power_w: Optional[float] = None
    samples: Optional[int] = None
    included_in_total: Optional[bool] = None


class EnergyWindow(Open):
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    duration_s: Optional[float] = None


class AboveIdle(StatusBlock):
    """Gross energy minus idle power x duration (not the headline)."""
    j_per_output_token: Optional[float] = None


class PerRequestEnergy(Open):
    """Each interval's energy split across the requests in flight (prefill + decode)."""
    mean_j: Optional[float] = None
    p50_j: Optional[float] = None
    p99_j: Optional[float] = None
    mean_prefill_j: Optional[float] = None
    mean_decode_j: Optional[float] = None


class Energy(StatusBlock):
    """analysis.energy (or "unmeasured" with the reason)."""
    energy_j: Optional[float] = None
    j_per_output_token: Optional[float] = None
    avg_power_w: Optional[float] = None
    output_tokens_per_j: Optional[float] = None
    j_per_request: Optional[float] = None
    window: Optional[EnergyWindow] = None
    window_rule: Optional[str] = None
    method: Optional[str] = None
    warnings: Optional[list[str]] = None
    unmeasured_parts: Optional[list[Any]] = None
    sources: Optional[list[Any]] = None
    series: Optional[list[EnergySeries]] = None
    above_idle: Optional[AboveIdle] = None
    per_request: Optional[PerRequestEnergy] = None


def nonfinite_keys(data: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the NaN / ±Infinity numbers in ``data`` (a summary dict or Summary): never
    written by loadgen (store_summary writes them as null), so a file holding one was edited."""
    if isinstance(data, Model):
        data = data.as_dict()
    if isinstance(data, float):
        return [] if data - data == 0 else [prefix or "(top)"]
    if isinstance(data, dict):
        return [x for k, v in data.items() for x in nonfinite_keys(v, f"{prefix}{k}.")]
    if isinstance(data, (list, tuple)):
        return [x for i, v in enumerate(data) for x in nonfinite_keys(v, f"{prefix}{i}.")]
    return []
