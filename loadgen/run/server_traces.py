"""server_traces around the load: the OTLP receiver for the run, then the join (harness.around).

    scenario server_traces ─► receiving(run): analysis.server.otlp_receiver.Receiver on its own
        thread (host:otlp_port; 0: any free port), its endpoint printed ─► the load (every request's traceparent: client/trace_context)
        ─► after it: wait_quiet (late spans, at most wait_s) ─► spans_join.join_file:
           records.jsonl (or records.arrow, a batch at a time) gets ``server_timing`` per
           matched record
        ─► server_spans.json {endpoint, joined, unmatched_spans, bad_spans{reason: n}, ...}
           (analysis.server.timing_summary reads it for summary.json ``server_timing``)

A managed vLLM (target.server kind vllm) is started with the tracing flags pointing at the
receiver (``traced_spec``: --otlp-traces-endpoint, --collect-detailed-traces all, OTLP over
HTTP/protobuf) unless its args set them, a managed JAX server with --otlp-traces-endpoint; the receiver is started before it and stopped after
it (vLLM flushes its spans when it stops). A port that cannot be bound is one line naming
server_traces.otlp_port (exit 2). A load that raised is not joined (the receiver is stopped; no
wait). A sweep's one managed server (loadgen.multirun.sweep) is started traced too: the sweep pins
otlp_port 0 to one free port (``for_shared_server``) and every point's receiver opens there in
turn. Nothing here runs on the sending loop.
"""
from __future__ import annotations

import contextlib
import socket
import sys
from types import SimpleNamespace
from typing import Optional

from analysis.server.otlp_receiver import Receiver
from analysis.server.spans_join import join_file
from loadgen.run.rundir import write_json
from loadgen.scenario.strict import ScenarioError

FILE = "server_spans.json"
RAW_FILE = "server_spans.raw.jsonl"     # server_traces.keep_raw_mb: the export bodies as they came


@contextlib.contextmanager
def receiving(run):
    """See the module doc; yields the Receiver, or None without ``server_traces``."""
    st = run.sc.server_traces
    if st is None:
        yield None
        return
    rx = Receiver(st.otlp_port, st.host, max_body_bytes=int(st.max_body_mb * 2**20),
                  max_spans=st.max_spans,
                  raw_path=run.run_dir / RAW_FILE if st.keep_raw_mb > 0 else None,
                  raw_max_bytes=int(st.keep_raw_mb * 2**20))
    try:
        rx.start()
    except OSError as e:
        raise ScenarioError(f"server_traces.otlp_port: cannot listen on {st.host}:"
                            f"{st.otlp_port} ({e.strerror or e})") from None
    print(f"server_traces: OTLP/HTTP receiver at {rx.endpoint}", file=sys.stderr, flush=True)
    try:
        yield rx
        rx.wait_quiet(st.quiet_s, st.wait_s)
    finally:
        rx.stop()
    settle(run, rx)


def for_shared_server(sc):
    """A sweep's scenario with ``server_traces.otlp_port`` 0 pinned to one free port, so the
    one managed server of every point sends to the receiver each point opens there in turn;
    unchanged without server_traces or a managed server."""
    st = sc.server_traces
    if st is None or sc.target.server is None or st.otlp_port:
        return sc
    with socket.socket() as s:
        s.bind((st.host, 0))
        port = s.getsockname()[1]
    return sc.model_copy(update={"server_traces": st.model_copy(update={"otlp_port": port})})


def shared_spec(sc):
    """The sweep's managed server spec, traced to ``sc``'s (pinned) receiver port."""
    st = sc.server_traces
    if st is None:
        return sc.target.server
    return traced_spec(sc.target.server, SimpleNamespace(
        endpoint=f"http://{st.host}:{st.otlp_port}/v1/traces"))


def traced_spec(spec, rx: Optional[Receiver]):
    """``spec`` (target.server) for the run: a vLLM or JAX one with its spans sent to ``rx``."""
    if rx is None or spec is None or spec.kind not in ("vllm", "jax"):
        return spec
    if spec.kind == "jax":      # servers/jax/spans.py: OTLP/JSON, no detail levels
        return spec.model_copy(update={"args": {"otlp_traces_endpoint": rx.endpoint, **spec.args}})
    args = {"otlp_traces_endpoint": rx.endpoint, "collect_detailed_traces": "all", **spec.args}
    # spans every 0.2 s (the SDK's default batch delay is 5 s): a sweep's shared server is not
    # stopped between points, so its spans must come while the point's receiver waits
    env = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "200",
           **spec.env}
    return spec.model_copy(update={"args": args, "env": env})


def settle(run, rx: Receiver) -> dict:
    """The join and server_spans.json (see the module doc)."""
    snap = rx.snapshot()
    name = "records.arrow" if run.sc.output.records == "arrow" else "records.jsonl"
    stats = join_file(run.run_dir / name, snap.pop("timings"), "otlp")
    out = {"endpoint": rx.endpoint, "traceparent": bool(run.sc.api.traceparent),
           **stats, **snap}
    write_json(run.run_dir / FILE, out)
    return out
